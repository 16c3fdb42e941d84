//! What a sampler opens ([`SampleSpec`]) and how often it samples
//! ([`SampleRate`]): plain data, shared by the live sampler
//! ([`super::ring_open`]) and the simulated one (`super::sim`) without
//! either importing the other.

use super::EventAttr;
use crate::sys::abi;

/// How often to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleRate {
    /// `freq = 1`: this many samples per second per CPU.
    Frequency(u64),
    /// A sample every this many events.
    Period(u64),
}

/// Call stacks with each sample (`PERF_SAMPLE_CALLCHAIN`): what the
/// kernel walks (frame pointers) and how deep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallchainSpec {
    /// `sample_max_stack`: frames per sample at most (the kernel also
    /// caps it at `kernel.perf_event_max_stack`).
    pub max_stack: u16,
    /// `exclude_callchain_kernel`: no kernel frames.
    pub exclude_kernel: bool,
    /// `exclude_callchain_user`: no user frames.
    pub exclude_user: bool,
}

/// The default depth of a sampled call chain: the kernel's default
/// `kernel.perf_event_max_stack`.
pub const DEFAULT_MAX_STACK: u16 = 127;

impl Default for CallchainSpec {
    fn default() -> Self {
        CallchainSpec {
            max_stack: DEFAULT_MAX_STACK,
            exclude_kernel: false,
            exclude_user: false,
        }
    }
}

/// What a sampler opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleSpec {
    /// The sampled event (the group's leader).
    pub attr: EventAttr,
    /// Counting members read with each sample (`PERF_SAMPLE_READ`).
    pub members: Vec<EventAttr>,
    /// The frequency or period.
    pub rate: SampleRate,
    /// `PERF_SAMPLE_CGROUP` and `PERF_RECORD_CGROUP` (Linux ≥ 5.7).
    pub cgroup: bool,
    /// Data pages of the ring (a power of two).
    pub ring_pages: usize,
    /// Bytes in the ring before the fd polls readable (0: half the ring).
    pub watermark: u32,
    /// Call stacks with each sample (none unless asked: they cost ring
    /// space and the kernel's walk).
    pub callchain: Option<CallchainSpec>,
}

impl SampleSpec {
    /// `cpu-clock` (the software PMU's, type 1) at `rate`, no group, the
    /// default ring: what sampling uses without a hardware PMU.
    pub fn cpu_clock(rate: SampleRate) -> SampleSpec {
        SampleSpec {
            attr: EventAttr {
                type_: abi::TYPE_SOFTWARE,
                config: [abi::SW_CPU_CLOCK, 0, 0, 0],
                event: "cpu-clock".into(),
                pmu: "software".into(),
                exclude: Default::default(),
            },
            members: Vec::new(),
            rate,
            cgroup: false,
            ring_pages: super::ring::DEFAULT_RING_PAGES,
            watermark: 0,
            callchain: None,
        }
    }

    /// The `sample_type` the records are decoded with.
    pub fn sample_type(&self) -> u64 {
        let mut t = abi::SAMPLE_TID | abi::SAMPLE_TIME | abi::SAMPLE_CPU | abi::SAMPLE_PERIOD;
        if self.cgroup {
            t |= abi::SAMPLE_CGROUP;
        }
        if !self.members.is_empty() {
            t |= abi::SAMPLE_READ;
        }
        if self.callchain.is_some() {
            t |= abi::SAMPLE_CALLCHAIN;
        }
        t
    }

    /// The leader's `read_format` (`GROUP | ID` with members).
    pub fn read_format(&self) -> u64 {
        if self.members.is_empty() {
            0
        } else {
            abi::FORMAT_GROUP | abi::FORMAT_ID
        }
    }

    /// The wakeup watermark in bytes for a data area of `data_size`.
    pub fn watermark_for(&self, data_size: usize) -> u32 {
        if self.watermark == 0 {
            u32::try_from(data_size / 2).unwrap_or(u32::MAX)
        } else {
            self.watermark
        }
    }
}
