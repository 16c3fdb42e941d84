//! The host the exporter counts on: its PMU table, tracefs and kernel
//! (the live one, or the simulated PMU of a fixture tree).

use super::AppError;
use crate::config::{Config, ConfigError};
use crate::perf::live::LiveKernel;
use crate::perf::sim::SimKernel;
use crate::perf::Kernel;
use crate::pmu::PmuTable;
use crate::resolve::Context;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the host's files are, and which config to count.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// `--path.sysfs`.
    pub sysfs: PathBuf,
    /// `--path.procfs`.
    pub procfs: PathBuf,
    /// `--path.tracefs` (None: found under sysfs).
    pub tracefs: Option<PathBuf>,
    /// `--path.cgroupfs` (None: found in mountinfo).
    pub cgroupfs: Option<PathBuf>,
    /// `--simulate`: the simulated PMU of the sysfs tree.
    pub simulate: bool,
    /// `--simulate.read-delay`.
    pub simulate_read_delay: Option<Duration>,
    /// `--simulate.refuse`: PMU (or `*`) and the errno its opens fail with.
    pub simulate_refuse: Vec<(String, i32)>,
    /// `--simulate.open-delay` (hidden, for tests).
    pub simulate_open_delay: Option<Duration>,
    /// `--simulate.guest-rate` (hidden, for tests): PMU and the constant
    /// rate its counters count ([`SimKernel::set_guest_rate`]).
    pub simulate_guest_rate: Vec<(String, f64)>,
    /// `--collector.self-test`: run the start-up self-test
    /// ([`crate::engine::selftest`]).
    pub self_test: bool,
    /// `--config.file` (None: the embedded default).
    pub config_file: Option<PathBuf>,
    /// `--config.aggregate-cpus`.
    pub aggregate_cpus: bool,
}

impl HostSettings {
    /// The simulated PMU of the sysfs tree `sysfs`, with the embedded
    /// default config and every other setting off.
    pub fn simulated(sysfs: PathBuf, procfs: PathBuf) -> Self {
        HostSettings {
            sysfs,
            procfs,
            tracefs: None,
            cgroupfs: None,
            simulate: true,
            simulate_read_delay: None,
            simulate_refuse: Vec::new(),
            simulate_guest_rate: Vec::new(),
            self_test: false,
            simulate_open_delay: None,
            config_file: None,
            aggregate_cpus: false,
        }
    }

    /// The start-up self-test's verdicts on `kernel` (`--collector.self-test`;
    /// empty without it, or without a kernel to count on).
    pub fn self_test(
        &self,
        kernel: Option<&dyn Kernel>,
        table: &PmuTable,
    ) -> Vec<crate::engine::selftest::SelfTest> {
        let Some(k) = kernel.filter(|_| self.self_test) else {
            return Vec::new();
        };
        let online = k
            .online_cpus(&table.sysfs)
            .unwrap_or_else(|| table.topology.online.clone());
        crate::engine::selftest::run(k, table, &online, &self.procfs)
    }

    /// What the host tells about its counters (the NMI watchdog, a
    /// virtual PMU), under these roots.
    pub fn facts(&self) -> crate::pmu::virt::HostFacts {
        crate::pmu::virt::HostFacts::read(&self.sysfs, &self.procfs)
    }

    /// Reads the config (or the embedded default), aggregated over CPUs
    /// when asked; start-up and every reload read it here.
    pub fn load_config(&self) -> Result<Config, ConfigError> {
        let mut cfg = match &self.config_file {
            // Read bounded: a FIFO or a device is refused at once instead of
            // blocking start-up or a reload, and so is a huge file.
            Some(p) => Config::load(p)?,
            None => Config::default_config(),
        };
        if self.aggregate_cpus {
            cfg.aggregate_cpus();
        }
        Ok(cfg)
    }
}

/// The discovered host.
pub(super) struct Host {
    /// The PMU table.
    pub table: PmuTable,
    /// Where tracefs is.
    pub ctx: Context,
    /// The kernel to probe and count on; None for a fixture tree without
    /// `--simulate` (reports only, no probing).
    pub kernel: Option<Arc<dyn Kernel>>,
    /// `check --simulate`'s simulated PMU, on a manual clock (its
    /// collection's window is exact, so its report is too).
    pub manual: Option<Arc<SimKernel>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("sysfs", &self.table.sysfs)
            .field("ctx", &self.ctx)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Discovers the PMUs and picks the kernel.
    pub(super) fn open(s: &HostSettings) -> Result<Host, AppError> {
        Host::open_with(s, None)
    }

    /// [`open`](Self::open); with `usual`, a simulated PMU has the
    /// counter budget of its model (`SimKernel::set_usual_counters`),
    /// the NMI watchdog holding one where the host's facts say so
    /// (`check --simulate` shows what the real host's budget would be;
    /// `serve --simulate` keeps an unbounded PMU, which never
    /// multiplexes).
    pub(super) fn open_with(
        s: &HostSettings,
        usual: Option<&crate::pmu::virt::HostFacts>,
    ) -> Result<Host, AppError> {
        let mut table = PmuTable::discover(&s.sysfs).map_err(|err| AppError::Pmu {
            sysfs: s.sysfs.display().to_string(),
            err,
        })?;
        table.read_identities(&s.procfs);
        for w in &table.warnings {
            tracing::warn!(warning = %w, "sysfs entry skipped");
        }
        let ctx = match &s.tracefs {
            Some(t) => Context::from(crate::pmu::host::Tracefs::at(t)),
            None => Context::for_host(&s.sysfs, &s.procfs),
        };
        let knobs = s.simulate_read_delay.is_some()
            || s.simulate_open_delay.is_some()
            || !s.simulate_refuse.is_empty()
            || !s.simulate_guest_rate.is_empty();
        if knobs && !s.simulate {
            return Err(AppError::DelayNeedsSimulate);
        }
        let mut manual = None;
        let kernel: Option<Arc<dyn Kernel>> = if s.simulate {
            let sim = match usual {
                Some(_) => SimKernel::with_manual_clock(table.clone()),
                None => SimKernel::new(table.clone()),
            };
            if let Some(facts) = usual {
                sim.set_usual_counters(facts.watchdog_holds_counter());
            }
            if let Some(d) = s.simulate_read_delay {
                sim.set_read_delay(d);
            }
            if let Some(d) = s.simulate_open_delay {
                sim.set_open_delay(d);
            }
            for (pmu, rate) in &s.simulate_guest_rate {
                sim.set_guest_rate(pmu, Some(*rate));
            }
            for (pmu, errno) in &s.simulate_refuse {
                if pmu == "*" {
                    for p in &table.pmus {
                        sim.refuse(&p.name, *errno);
                    }
                } else {
                    sim.refuse(pmu, *errno);
                }
            }
            let sim = Arc::new(sim);
            if usual.is_some() {
                manual = Some(sim.clone());
            }
            Some(sim)
        } else if is_live_sysfs(&s.sysfs, &s.procfs) {
            Some(Arc::new(LiveKernel::new()))
        } else {
            None
        };
        Ok(Host {
            table,
            ctx,
            kernel,
            manual,
        })
    }
}

/// Whether the sysfs root is a mounted sysfs (this machine's own, also
/// when the host's `/sys` is mounted elsewhere, as in a DaemonSet) rather
/// than a copied tree.
fn is_live_sysfs(p: &Path, procfs: &Path) -> bool {
    let Ok(c) = std::fs::canonicalize(p) else {
        return false;
    };
    if c == Path::new("/sys") {
        return true;
    }
    crate::bounded::read_string(
        &procfs.join("self/mountinfo"),
        crate::bounded::MOUNTINFO_BYTES,
    )
    .is_ok_and(|mi| crate::pmu::is_sysfs_mount(&c, &mi))
}
