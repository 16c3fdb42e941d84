//! Symbolization of sampled call stacks, with the `blazesym` crate:
//! user frames by the ELF symbols of the file mapped at the address
//! (`<procfs>/<pid>/maps`, the file opened through `<procfs>/<pid>/root`
//! so a container's binary is found), kernel frames by
//! `<procfs>/kallsyms`.
//!
//! * **Off the drain path.** Draining only counts raw addresses
//!   ([`super::Stacks`]); a process's maps are read once, after a drain,
//!   the first time it has user frames ([`Symbolizer::prefetch`]), so a
//!   process that exits before the profile ends still has them; symbols
//!   are looked up once, when the profile is built.
//! * **Unsymbolized frames** keep the module (its path), the offset in
//!   the file and the GNU build-id (hex), as profile formats want for
//!   later symbolization: a stripped binary, a file replaced on disk, a
//!   process whose maps could not be read.
//! * **The right file.** Symbols are read from a file whose build-id is
//!   the one of the mapped file, read when the maps were: the mapping
//!   itself (`<procfs>/<pid>/map_files/<range>`) while the process lives,
//!   else the path through its root, else the path as named. A binary
//!   replaced on disk after its process exited is not read for it.
//! * **Bounds.** Maps of at most [`MAX_MAPPED_PIDS`] processes with at
//!   most [`MAX_MAPPINGS`] executable file mappings each (a maps file is
//!   read up to 4 MiB); symbols cached per (module, offset) up to
//!   [`MAX_SYMBOLS`] entries (then the cache starts over), build-ids per
//!   file up to [`MAX_MODULES`] (each about 100 bytes + the name).

use crate::perf::record::Space;
use blazesym::symbolize::source::{Elf, Kernel, Source};
use blazesym::symbolize::{Input, Symbolized};
use blazesym::MaybeDefault;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Processes whose maps are held at most.
pub const MAX_MAPPED_PIDS: usize = 4096;
/// Executable file mappings kept per process at most.
pub const MAX_MAPPINGS: usize = 4096;
/// Cached symbol lookups at most: about 64 bytes + the name each.
pub const MAX_SYMBOLS: usize = 262_144;
/// Files (by device and inode) whose build-id is held at most.
pub const MAX_MODULES: usize = 16_384;
/// The largest maps file read.
const MAX_MAPS_BYTES: u64 = 4 << 20;

/// A resolved frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function, when a symbol covers the address.
    pub function: Option<Arc<str>>,
    /// The module: a file's path, `[kernel.kallsyms]`, or `[unknown]`.
    pub module: Arc<str>,
    /// The module's GNU build-id, hex.
    pub build_id: Option<Arc<str>>,
    /// The offset in the module's file (user frames of a file mapping),
    /// else the address.
    pub address: u64,
}

/// The module of kernel frames.
pub const KERNEL_MODULE: &str = "[kernel.kallsyms]";
/// The module of frames no mapping covers.
pub const UNKNOWN_MODULE: &str = "[unknown]";

/// One executable file mapping of a process.
#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    module: Arc<Module>,
}

/// A mapped file.
#[derive(Debug)]
struct Module {
    /// Its path, as the maps file says.
    path: Arc<str>,
    /// Where it can be opened, best first: the mapping itself
    /// (`map_files`, while the process lives, even if the file was
    /// replaced or deleted), through the process's root, as named.
    candidates: Vec<PathBuf>,
    /// The first candidate whose build-id is the mapped file's, found at
    /// the first lookup (`None` inside: none is, e.g. the binary was
    /// replaced on disk after its process exited).
    open_at: std::sync::OnceLock<Option<PathBuf>>,
    build_id: Option<Arc<str>>,
    /// The cache key: the build-id, else device and inode.
    key: Arc<str>,
}

impl Module {
    /// The file to read symbols from: one with the mapped file's build-id
    /// (without one, the first that exists).
    fn source(&self) -> Option<&PathBuf> {
        self.open_at
            .get_or_init(|| {
                self.candidates
                    .iter()
                    .find(|c| match &self.build_id {
                        Some(want) => build_id_of(c).as_ref() == Some(want),
                        None => c.exists(),
                    })
                    .cloned()
            })
            .as_ref()
    }
}

fn build_id_of(p: &Path) -> Option<Arc<str>> {
    blazesym::helper::read_elf_build_id(p)
        .ok()
        .flatten()
        .map(|b| Arc::<str>::from(hex(&b)))
}

/// Resolves frames; see the module's comment.
pub struct Symbolizer {
    procfs: PathBuf,
    maps: HashMap<u32, Arc<[Mapping]>>,
    modules: HashMap<(String, u64), Arc<Module>>,
    cache: HashMap<(Arc<str>, u64), Option<Arc<str>>>,
    kernel: HashMap<u64, Option<Arc<str>>>,
}

/// The `blazesym` symbolizer of one profile's resolution: it keeps the
/// files it opened (and is not `Send`), so it lives only while a
/// profile is built.
pub struct Backend(blazesym::symbolize::Symbolizer);

impl Backend {
    /// A backend with ELF symbols only (no DWARF, no inlined functions).
    pub fn new() -> Self {
        Backend(
            blazesym::symbolize::Symbolizer::builder()
                .enable_code_info(false)
                .enable_inlined_fns(false)
                .build(),
        )
    }
}

impl Default for Backend {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("procfs", &self.procfs)
            .field("pids", &self.maps.len())
            .field("symbols", &self.cache.len())
            .finish_non_exhaustive()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The executable file mappings of a maps file's text: `(start, end,
/// offset, device, inode, path)`.
fn parse_maps(text: &str) -> Vec<(u64, u64, u64, String, u64, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(dev), Some(ino)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.next().unwrap_or("").trim_start();
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b), Ok(off), Ok(ino)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            u64::from_str_radix(off, 16),
            ino.parse::<u64>(),
        ) else {
            continue;
        };
        if a >= b || out.len() >= MAX_MAPPINGS {
            continue;
        }
        out.push((a, b, off, dev.to_string(), ino, path.to_string()));
    }
    out
}

impl Symbolizer {
    /// A symbolizer reading `<procfs>/<pid>/maps` and `<procfs>/kallsyms`.
    pub fn new(procfs: &Path) -> Self {
        Symbolizer {
            procfs: procfs.to_path_buf(),
            maps: HashMap::new(),
            modules: HashMap::new(),
            cache: HashMap::new(),
            kernel: HashMap::new(),
        }
    }

    /// Reads the maps of each of `pids` not read yet (within the bound).
    pub fn prefetch<'a>(&mut self, pids: impl IntoIterator<Item = &'a u32>) {
        for &pid in pids {
            if self.maps.contains_key(&pid) || self.maps.len() >= MAX_MAPPED_PIDS {
                continue;
            }
            let maps = self.read_maps(pid);
            self.maps.insert(pid, maps);
        }
    }

    fn read_maps(&mut self, pid: u32) -> Arc<[Mapping]> {
        let p = self.procfs.join(pid.to_string());
        let Ok(text) = crate::bounded::read_string(&p.join("maps"), MAX_MAPS_BYTES) else {
            return Arc::new([]);
        };
        let mut v = Vec::new();
        for (start, end, offset, dev, ino, path) in parse_maps(&text) {
            let key = (dev, ino);
            let module = match self.modules.get(&key) {
                Some(m) => m.clone(),
                None => {
                    let candidates = vec![
                        p.join("map_files").join(format!("{start:x}-{end:x}")),
                        p.join("root").join(path.trim_start_matches('/')),
                        PathBuf::from(&path),
                    ];
                    // The mapped file's own build-id: through the first
                    // candidate that opens (the mapping itself while the
                    // process lives).
                    let build_id = candidates.iter().find_map(|c| build_id_of(c));
                    let mkey: Arc<str> = build_id
                        .clone()
                        .unwrap_or_else(|| format!("{}:{}", key.0, key.1).into());
                    let m = Arc::new(Module {
                        path: path.into(),
                        candidates,
                        open_at: std::sync::OnceLock::new(),
                        build_id,
                        key: mkey,
                    });
                    if self.modules.len() >= MAX_MODULES {
                        self.modules.clear();
                    }
                    self.modules.insert(key, m.clone());
                    m
                }
            };
            v.push(Mapping {
                start,
                end,
                offset,
                module,
            });
        }
        v.into()
    }

    /// Resolves the frames of `pid`'s stacks: kernel frames in one batch
    /// from kallsyms, user frames through the process's mappings.
    pub fn resolve(&mut self, bz: &Backend, pid: u32, frames: &[(Space, u64)]) -> Vec<Frame> {
        // The first frame of each context is where it was interrupted;
        // the others are return addresses, just past their call: looked
        // up one byte before (a call that ends a function, to a function
        // that does not return, would otherwise name the next one).
        let lookups: Vec<(Space, u64, u64)> = frames
            .iter()
            .enumerate()
            .map(|(i, &(s, ip))| {
                let first = i == 0 || frames[i - 1].0 != s;
                (s, ip, if first { ip } else { ip.saturating_sub(1) })
            })
            .collect();
        let missing: Vec<u64> = lookups
            .iter()
            .filter(|(s, _, at)| *s == Space::Kernel && !self.kernel.contains_key(at))
            .map(|(_, _, at)| *at)
            .collect();
        if !missing.is_empty() {
            self.kernel_batch(bz, &missing);
        }
        lookups
            .iter()
            .map(|&(s, ip, at)| self.frame(bz, pid, s, ip, at))
            .collect()
    }

    fn kernel_batch(&mut self, bz: &Backend, addrs: &[u64]) {
        let src = Source::Kernel(Kernel {
            kallsyms: MaybeDefault::Some(self.procfs.join("kallsyms")),
            vmlinux: MaybeDefault::None,
            kaslr_offset: Some(0),
            debug_syms: false,
            ..Default::default()
        });
        let names: Vec<Option<Arc<str>>> = match bz.0.symbolize(&src, Input::AbsAddr(addrs)) {
            Ok(v) => v.iter().map(name_of).collect(),
            Err(e) => {
                tracing::debug!(error = %e, "kernel frames not symbolized");
                vec![None; addrs.len()]
            }
        };
        if self.kernel.len() + addrs.len() > MAX_SYMBOLS {
            self.kernel.clear();
        }
        for (a, n) in addrs.iter().zip(names) {
            self.kernel.insert(*a, n);
        }
    }

    /// The frame at `ip`, its symbol looked up at `at`.
    fn frame(&mut self, bz: &Backend, pid: u32, space: Space, ip: u64, at: u64) -> Frame {
        match space {
            Space::Kernel => Frame {
                function: self.kernel.get(&at).cloned().flatten(),
                module: KERNEL_MODULE.into(),
                build_id: None,
                address: ip,
            },
            Space::User => self.user(bz, pid, ip, at),
            Space::Other => unknown(ip),
        }
    }

    fn user(&mut self, bz: &Backend, pid: u32, ip: u64, at: u64) -> Frame {
        let Some(m) = self
            .maps
            .get(&pid)
            .and_then(|maps| maps.iter().find(|m| m.start <= at && at < m.end))
            .cloned()
        else {
            return unknown(ip);
        };
        let offset = ip.saturating_sub(m.start) + m.offset;
        let lookup = at - m.start + m.offset;
        let key = (m.module.key.clone(), lookup);
        let function = match self.cache.get(&key) {
            Some(f) => f.clone(),
            None => {
                let f = m.module.source().and_then(|path| {
                    let src = Source::Elf(Elf {
                        debug_syms: false,
                        ..Elf::new(path.clone())
                    });
                    match bz.0.symbolize_single(&src, Input::FileOffset(lookup)) {
                        Ok(s) => name_of(&s),
                        Err(_) => None,
                    }
                });
                if self.cache.len() >= MAX_SYMBOLS {
                    self.cache.clear();
                }
                self.cache.insert(key, f.clone());
                f
            }
        };
        Frame {
            function,
            module: m.module.path.clone(),
            build_id: m.module.build_id.clone(),
            address: offset,
        }
    }

    /// Cached symbol lookups (a bound's test).
    pub fn cached(&self) -> usize {
        self.cache.len() + self.kernel.len()
    }
}

fn unknown(ip: u64) -> Frame {
    Frame {
        function: None,
        module: UNKNOWN_MODULE.into(),
        build_id: None,
        address: ip,
    }
}

fn name_of(s: &Symbolized<'_>) -> Option<Arc<str>> {
    s.as_sym().map(|s| Arc::from(s.name.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_keep_executable_file_mappings() {
        let text = "\
00400000-00401000 r--p 00000000 fd:01 1234 /usr/bin/w
00401000-00402000 r-xp 00001000 fd:01 1234 /usr/bin/w
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 [vdso]
7f0000002000-7f0000003000 r-xp 00002000 fd:01 99   /lib/with space.so
garbage line
zz-yy r-xp 0 fd:01 1 /x
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            (
                0x401000,
                0x402000,
                0x1000,
                "fd:01".into(),
                1234,
                "/usr/bin/w".into()
            )
        );
        assert_eq!(m[1].5, "/lib/with space.so");
    }

    #[test]
    fn symbols_are_read_only_from_a_file_with_the_mapped_build_id() {
        // This test binary stands for the mapped file, and for a file
        // replaced on disk when the build-id recorded differs.
        let exe = std::env::current_exe().unwrap();
        let Some(id) = build_id_of(&exe) else {
            panic!("the test binary has no GNU build-id");
        };
        let module = |build_id: Option<Arc<str>>| Module {
            path: "/x".into(),
            candidates: vec!["/nonexistent/x".into(), exe.clone()],
            open_at: std::sync::OnceLock::new(),
            build_id,
            key: "k".into(),
        };
        assert_eq!(module(Some(id.clone())).source(), Some(&exe));
        assert_eq!(module(Some("00ff".into())).source(), None, "replaced");
        assert_eq!(
            module(None).source(),
            Some(&exe),
            "no build-id: the first that exists"
        );
    }

    /// A Rust function of this test binary, its name mangled in the
    /// ELF symbols (`_ZN...17h<hash>E`).
    #[inline(never)]
    fn demangled_probe(n: u64) -> u64 {
        std::hint::black_box(n).wrapping_mul(3)
    }

    #[test]
    fn rust_functions_are_demangled() {
        // This process's own frame, through its maps in /proc: blazesym's
        // `demangle` feature gives the path without the hash.
        let addr = demangled_probe as fn(u64) -> u64 as usize as u64;
        assert_eq!(demangled_probe(2), 6);
        let pid = std::process::id();
        let mut s = Symbolizer::new(Path::new("/proc"));
        s.prefetch([&pid]);
        let f = s.resolve(&Backend::new(), pid, &[(Space::User, addr)]);
        assert_eq!(
            f[0].function.as_deref(),
            Some("perf_exporter::engine::sample::symbolize::tests::demangled_probe"),
            "{f:?}"
        );
    }

    #[test]
    fn kernel_frames_resolve_from_a_kallsyms_file() {
        let dir = std::env::temp_dir().join(format!("pe-kallsyms-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("kallsyms"),
            "ffffffff81000000 T _stext\nffffffff81000100 T do_work\nffffffff81000200 T other\n",
        )
        .unwrap();
        let mut s = Symbolizer::new(&dir);
        let f = s.resolve(
            &Backend::new(),
            1,
            &[
                (Space::Kernel, 0xffff_ffff_8100_0110),
                (Space::Kernel, 0xffff_ffff_8100_0200),
                (Space::User, 5),
            ],
        );
        assert_eq!(f[0].function.as_deref(), Some("do_work"));
        // A return address just past the end of do_work is do_work's.
        assert_eq!(f[1].function.as_deref(), Some("do_work"));
        assert_eq!(f[1].address, 0xffff_ffff_8100_0200);
        let f = &f[1..];
        assert_eq!(&*f[0].module, KERNEL_MODULE);
        // No maps for pid 1 under this root: the address is kept.
        assert_eq!(
            (f[1].function.clone(), &*f[1].module, f[1].address),
            (None, UNKNOWN_MODULE, 5)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
