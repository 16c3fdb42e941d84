//! The kernel's interface as data, a leaf of the pipeline (as perf-event
//! keeps its `-sys` crate): the perf ABI numbers ([`abi`], from
//! perf-event-open-sys's bindings) and which filesystem a directory is on
//! ([`fs`], `statfs(2)`). Nothing here imports the crate, so the spec
//! grammar, the resolver, cgroup discovery and the simulated kernel can
//! all name the same numbers without reaching the syscall layer
//! ([`crate::perf`]). With `perf`, this is the sys layer: the only
//! `unsafe` code (here the one `statfs` call, each block with its
//! `// SAFETY:` note).

pub mod abi;
#[allow(unsafe_code)]
pub mod fs;
