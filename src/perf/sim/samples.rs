//! The simulated PMU's samplers: rings that fill with plausible records,
//! so `serve --simulate` and `top --simulate` show sampled attribution on
//! the fixtures.
//!
//! A sampler produces, at each drain, the samples its rate gives for the
//! time since the previous drain (`Hz × seconds`, or events per second ÷
//! period), spread over a fixed set of simulated tasks by weight. The
//! first drain starts with a `PERF_RECORD_COMM` per task (and a
//! `PERF_RECORD_CGROUP` per task's cgroup when cgroups are sampled), as
//! the kernel sends them for tasks that start or rename while sampling.
//! Each sample's period is the event's simulated rate ÷ Hz (cycles 2e9/s,
//! anything else 1e9/s, as a `cpu-clock`'s nanoseconds).

use crate::perf::record::encode;
use crate::perf::ring::Drained;
use crate::perf::sample_spec::{SampleRate, SampleSpec};
use crate::perf::EventAttr;
use crate::sys::abi;
use std::time::Instant;

/// A simulated task: pid, name, weight, cgroup id and path.
pub(crate) type SimTask = (u32, &'static str, u32, u64, &'static str);

/// The simulated tasks. Weights sum to 20, so at 99 Hz over 1 s the shares
/// are 40%, 25%, 20%, 10% and 5%.
pub(crate) const TASKS: [SimTask; 5] = [
    (4242, "postgres", 8, 101, "/system.slice/postgresql.service"),
    (
        5150,
        "nginx",
        5,
        102,
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c1d2e3f_4a5b_6c7d_8e9f_0a1b2c3d4e5f.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope",
    ),
    (0, "swapper", 4, 1, "/"),
    (1, "systemd", 2, 103, "/init.scope"),
    (733, "sshd", 1, 104, "/system.slice/ssh.service"),
];

/// The kernel frame of every simulated call chain.
pub(crate) const SIM_KERNEL_FRAME: u64 = 0xffff_ffff_8100_0040;

/// One simulated sampler (one CPU).
#[derive(Debug)]
pub(crate) struct SimSampler {
    cpu: u32,
    cgroup: bool,
    /// Samples carry a call chain.
    chain: bool,
    /// The group's ids (leader first) when samples carry a group read.
    group: Vec<u64>,
    /// Samples per second.
    hz: f64,
    /// Events per sample.
    period: u64,
    start: Instant,
    /// Samples emitted so far.
    emitted: u64,
    announced: bool,
    buf: Vec<u8>,
}

/// The simulated event rate of a sampled event (events per second).
fn rate(attr: &EventAttr) -> f64 {
    if attr.type_ == abi::TYPE_HARDWARE && attr.config[0] & 0xffff_ffff == abi::HW_CPU_CYCLES {
        2e9
    } else {
        1e9
    }
}

impl SimSampler {
    pub(crate) fn new(spec: &SampleSpec, cpu: u32, ids: &[u64]) -> Self {
        let r = rate(&spec.attr);
        let (hz, period) = match spec.rate {
            SampleRate::Frequency(hz) => (hz.max(1) as f64, (r / hz.max(1) as f64) as u64),
            SampleRate::Period(p) => (r / p.max(1) as f64, p.max(1)),
        };
        SimSampler {
            cpu,
            cgroup: spec.cgroup,
            chain: spec.callchain.is_some(),
            group: if spec.members.is_empty() {
                Vec::new()
            } else {
                ids.to_vec()
            },
            hz,
            period,
            start: Instant::now(),
            emitted: 0,
            announced: false,
            buf: Vec::new(),
        }
    }

    /// The task of the `n`th sample: weighted round robin.
    fn task(n: u64) -> &'static SimTask {
        let total: u64 = TASKS.iter().map(|t| u64::from(t.2)).sum();
        let mut k = n % total;
        for t in &TASKS {
            if k < u64::from(t.2) {
                return t;
            }
            k -= u64::from(t.2);
        }
        &TASKS[0]
    }

    pub(crate) fn drain(&mut self, f: &mut dyn FnMut(&[u8])) -> Drained {
        let mut out = Drained::default();
        let mut emit = |f: &mut dyn FnMut(&[u8]), r: &[u8]| {
            out.records += 1;
            out.bytes += r.len() as u64;
            f(r);
        };
        if !self.announced {
            self.announced = true;
            for t in &TASKS {
                let r = encode::record(abi::RECORD_COMM, &encode::comm_body(t.0, t.0, t.1));
                emit(f, &r);
                if self.cgroup {
                    let r = encode::record(abi::RECORD_CGROUP, &encode::cgroup_body(t.3, t.4));
                    emit(f, &r);
                }
            }
        }
        let elapsed = self.start.elapsed();
        let due = (elapsed.as_secs_f64() * self.hz) as u64;
        let nanos = elapsed.as_nanos() as u64;
        while self.emitted < due {
            let t = Self::task(self.emitted + u64::from(self.cpu));
            let cg = self.cgroup.then_some(t.3);
            self.buf.clear();
            let mut body = encode::sample_body(t.0, t.0, nanos, self.cpu, self.period, None);
            if !self.group.is_empty() {
                // PERF_SAMPLE_READ (GROUP | ID): the leader's running count
                // and each member's at IPC 1.5, as the counting simulation.
                let leader = (self.emitted + 1) * self.period;
                body.extend((self.group.len() as u64).to_ne_bytes());
                for (i, id) in self.group.iter().enumerate() {
                    let v = if i == 0 { leader } else { leader / 2 * 3 };
                    body.extend(v.to_ne_bytes());
                    body.extend(id.to_ne_bytes());
                }
            }
            if self.chain {
                // PERF_SAMPLE_CALLCHAIN: a kernel frame (named by a
                // kallsyms the test gives in --path.procfs) and a
                // user-space chain of two frames, distinct per task (no
                // binary maps them).
                let chain = [
                    crate::perf::record::context::KERNEL,
                    SIM_KERNEL_FRAME,
                    crate::perf::record::context::USER,
                    0x1000 + u64::from(t.0),
                    0x2000,
                ];
                body.extend((chain.len() as u64).to_ne_bytes());
                body.extend(chain.iter().flat_map(|w| w.to_ne_bytes()));
            }
            if let Some(c) = cg {
                body.extend(c.to_ne_bytes());
            }
            encode::append(&mut self.buf, abi::RECORD_SAMPLE, &body);
            let buf = std::mem::take(&mut self.buf);
            emit(f, &buf);
            self.buf = buf;
            self.emitted += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::perf::record::{decode, Format, Record};
    use crate::perf::sim::SimKernel;
    use crate::perf::{EventAttr, Kernel, SampleRate, SampleSpec};
    use crate::pmu::PmuTable;
    use crate::sys::abi;

    fn spec(type_: u32, config: u64, members: usize) -> SampleSpec {
        let a = EventAttr {
            type_,
            config: [config, 0, 0, 0],
            event: "e".into(),
            pmu: "p".into(),
            exclude: Default::default(),
        };
        SampleSpec {
            attr: a.clone(),
            members: vec![a; members],
            rate: SampleRate::Frequency(1000),
            cgroup: true,
            ring_pages: 1,
            watermark: 0,
            callchain: None,
        }
    }

    #[test]
    fn sim_samplers_announce_tasks_then_sample_and_refuse_what_the_pmu_does() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-skx");
        let k = SimKernel::new(PmuTable::discover(&root).unwrap());
        let sp = spec(abi::TYPE_HARDWARE, abi::HW_CPU_CYCLES, 1);
        let mut s = k.open_sampler(&sp, 2).unwrap();
        assert_eq!((s.cpu, s.ids.len(), s.poll_fd()), (2, 2, None));
        let fmt = Format {
            sample_type: sp.sample_type(),
            read_format: sp.read_format(),
        };
        let (mut comms, mut cgroups, mut samples) = (0, 0, 0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.drain(&mut |r| match decode(r, &fmt).unwrap() {
            Record::Comm { .. } => comms += 1,
            Record::Cgroup { .. } => cgroups += 1,
            Record::Sample(x) => {
                samples += 1;
                assert_eq!(x.cpu, 2);
                assert_eq!(x.read.unwrap().len(), 2);
                assert!(x.cgroup.is_some());
            }
            other => panic!("{other:?}"),
        })
        .unwrap();
        assert_eq!((comms, cgroups), (5, 5));
        assert!(samples >= 10, "{samples}");
        // An offline CPU, an unknown software id: refused as the kernel does.
        let e = k.open_sampler(&sp, 99).unwrap_err();
        assert_eq!((e.op, e.errno), ("open", libc::ENODEV));
        k.refuse("cpu", libc::EACCES);
        let e = k.open_sampler(&sp, 0).unwrap_err();
        assert_eq!(e.errno, libc::EACCES);
        assert!(k.open_sampler(&spec(abi::TYPE_SOFTWARE, 99, 0), 0).is_err());
    }
}
