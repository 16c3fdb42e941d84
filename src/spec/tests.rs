use super::*;

#[test]
fn generic_names_parse() {
    assert_eq!(
        parse("cycles").unwrap().spec,
        EventSpec::Hardware {
            name: "cycles".into(),
            id: 0
        }
    );
    assert!(matches!(
        parse("ref-cycles").unwrap().spec,
        EventSpec::Hardware { id: 9, .. }
    ));
    assert!(matches!(
        parse("branches").unwrap().spec,
        EventSpec::Hardware { id: 4, .. }
    ));
    assert!(matches!(
        parse("context-switches").unwrap().spec,
        EventSpec::Software { id: 3, .. }
    ));
    assert!(matches!(
        parse("major-faults").unwrap().spec,
        EventSpec::Software { id: 6, .. }
    ));
}

#[test]
fn cache_names_encode() {
    let c = |s: &str| match parse(s).unwrap().spec {
        EventSpec::HwCache { config, .. } => config,
        other => panic!("{other:?}"),
    };
    assert_eq!(c("L1-dcache-load-misses"), 0x10000);
    assert_eq!(c("L1-dcache-loads"), 0);
    assert_eq!(c("LLC-load-misses"), 0x10002);
    assert_eq!(c("LLC-stores"), 0x102);
    assert_eq!(c("dTLB-load-misses"), 0x10003);
    assert_eq!(c("iTLB-load-misses"), 0x10004);
    assert_eq!(c("branch-load-misses"), 0x10005);
    assert_eq!(c("node-prefetch-misses"), 0x10206);
    assert_eq!(c("l1d-load-misses"), 0x10000);
    assert!(parse("iTLB-stores").is_err());
    assert_eq!(cache_event_names().len(), 6 + 4 + 6 + 6 + 2 + 2 + 6);
}

#[test]
fn pmu_specs() {
    let EventSpec::Pmu { pmu, terms, bare } = parse("cpu/event=0xd1,umask=0x20,cmask=2,inv,edge/")
        .unwrap()
        .spec
    else {
        panic!()
    };
    assert_eq!(pmu, "cpu");
    assert_eq!(terms.len(), 5);
    assert_eq!(bare, vec!["inv", "edge"]);
    assert!(matches!(
        parse("uncore_imc_*/cas_count_read/").unwrap().spec,
        EventSpec::Pmu { .. }
    ));
    let EventSpec::Pmu { terms, .. } = parse("arm_cmn/type=5,nodeid=?/").unwrap().spec else {
        panic!()
    };
    assert_eq!(terms[1].value, TermValue::Required);
    assert!(parse("cpu/event=1").is_err());
    assert!(parse("cpu//").is_err());
    assert!(parse("a/b/c/").is_err());
}

#[test]
fn raw_and_tracepoints() {
    assert_eq!(parse("r412e").unwrap().spec, EventSpec::Raw(0x412e));
    assert_eq!(
        parse("syscalls:sys_enter_getppid").unwrap().spec,
        EventSpec::Tracepoint {
            subsys: "syscalls".into(),
            name: "sys_enter_getppid".into()
        }
    );
    assert!(parse("sched:").is_err());
}

#[test]
fn duplicate_terms_refused() {
    let e = parse("cpu/event=1,event=2/").unwrap_err().0;
    assert!(e.contains("term `event` is given twice"), "{e}");
    assert!(parse("cpu/cycles,cycles/").is_err());
    assert!(parse("cpu/event=1,umask=2/").is_ok());
}

fn mods(s: &str) -> (EventSpec, abi::Exclude) {
    let e = parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    (e.spec, e.modifiers.exclude())
}

fn ex(user: bool, kernel: bool, hv: bool, host: bool, guest: bool) -> abi::Exclude {
    abi::Exclude {
        user,
        kernel,
        hv,
        host,
        guest,
    }
}

/// Each modifier alone sets what `perf stat -vv` shows perf 6.1 set.
#[test]
fn each_modifier_sets_perfs_exclude_bits() {
    let f = false;
    let t = true;
    assert_eq!(mods("cycles").1, abi::Exclude::default());
    assert_eq!(mods("cycles:u").1, ex(f, t, t, f, t));
    assert_eq!(mods("cycles:k").1, ex(t, f, t, f, f));
    assert_eq!(mods("cycles:h").1, ex(t, t, f, f, f));
    assert_eq!(mods("cycles:G").1, ex(f, f, f, t, f));
    assert_eq!(mods("cycles:H").1, ex(f, f, f, f, t));
    assert!(matches!(
        mods("instructions:u").0,
        EventSpec::Hardware { id: 1, .. }
    ));
}

#[test]
fn combinations_and_order() {
    let f = false;
    let t = true;
    assert_eq!(mods("cycles:uk").1, ex(f, f, t, f, t));
    assert_eq!(mods("cycles:ku").1, mods("cycles:uk").1);
    assert_eq!(mods("cycles:uG").1, ex(f, t, t, t, f));
    assert_eq!(mods("cycles:Gu").1, ex(f, t, t, t, f));
    assert_eq!(mods("cycles:kH").1, ex(t, f, t, f, t));
    assert_eq!(mods("cycles:uH").1, mods("cycles:u").1);
    assert_eq!(mods("cycles:GH").1, abi::Exclude::default());
    assert_eq!(mods("cycles:ukh").1, ex(f, f, f, f, t));
    // The set prints in perf's order, and prints back to itself.
    let e = parse("cycles:Hku").unwrap();
    assert_eq!(e.to_string(), "cycles:ukH");
    assert_eq!(parse(&e.to_string()).unwrap(), e);
}

/// Every form takes modifiers: generic, cache, software, raw, sysfs
/// PMU (after the closing `/`), tracepoint (a third field).
#[test]
fn every_form_takes_modifiers() {
    let u = mods("cycles:u").1;
    assert!(matches!(mods("LLC-load-misses:u"), (EventSpec::HwCache { .. }, x) if x == u));
    assert!(matches!(mods("page-faults:u"), (EventSpec::Software { .. }, x) if x == u));
    assert_eq!(mods("r412e:u"), (EventSpec::Raw(0x412e), u));
    let (p, x) = mods("cpu/cycles/u");
    assert!(
        matches!(p, EventSpec::Pmu { ref pmu, .. } if pmu == "cpu"),
        "{p:?}"
    );
    assert_eq!(x, u);
    let (p, x) = mods("armv8_pmuv3/inst_retired/k");
    assert!(matches!(p, EventSpec::Pmu { ref bare, .. } if bare == &["inst_retired"]));
    assert_eq!(x, mods("cycles:k").1);
    assert_eq!(
        parse("cpu/event=0x3c/uk").unwrap().to_string(),
        "cpu/event=0x3c/uk"
    );
    let (p, x) = mods("syscalls:sys_enter_getppid:u");
    assert_eq!(
        p,
        EventSpec::Tracepoint {
            subsys: "syscalls".into(),
            name: "sys_enter_getppid".into()
        }
    );
    assert_eq!(x, u);
    assert_eq!(
        parse("sched:sched_switch:u").unwrap().to_string(),
        "sched:sched_switch:u"
    );
    // A tracepoint without modifiers is not taken for `event:mods`.
    assert_eq!(mods("sched:sched_switch").1, abi::Exclude::default());
    assert!(parse("cpu/cycles/").unwrap().modifiers.is_empty());
}

/// A refused modifier names the spec, the modifier, its column and
/// what is supported.
#[test]
fn unsupported_modifiers_name_the_column() {
    let e = parse("cycles:up").unwrap_err().0;
    assert!(e.starts_with("`cycles:up`, column 9: perf's `p`"), "{e}");
    assert!(e.contains("`u` (user), `k` (kernel)"), "{e}");
    for (s, col) in [
        ("cpu-clock:ppp", 11),
        ("instructions:S", 14),
        ("r412e:D", 7),
        ("cpu/event=0x3c/uW", 17),
        ("cpu/event=0x3c/e", 16),
        ("sched:sched_switch:I", 20),
        ("cycles:b", 8),
    ] {
        let e = parse(s).unwrap_err().0;
        assert!(
            e.contains(&format!("column {col}: perf's")) && e.contains("not supported"),
            "{s}: {e}"
        );
    }
    // Leading blanks count in the column, as written and quoted.
    let e = parse("  cycles:x ").unwrap_err().0;
    assert!(
        e.starts_with("`  cycles:x`, column 10: `x` is not an event modifier"),
        "{e}"
    );
    let e = parse("cycles:").unwrap_err().0;
    assert!(e.contains("column 7: no modifier after `:`"), "{e}");
    let e = parse("sched:sched_switch:").unwrap_err().0;
    assert!(e.contains("column 19: no modifier"), "{e}");
    let e = parse("cycles:u:k").unwrap_err().0;
    assert!(e.contains("column 9: one `:` too many"), "{e}");
    assert!(parse("sched:sched_switch:u:k").is_err());
    assert!(parse("cpu/event=1").unwrap_err().0.contains("closing `/`"));
}

#[test]
fn scales() {
    assert!(check_scale(64.0).is_ok());
    assert!(check_scale(2f64.powi(-32)).is_ok());
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e308, 1e-300] {
        assert!(check_scale(bad).is_err(), "{bad}");
    }
}

#[test]
fn unknown_suggests() {
    let e = parse("cycels").unwrap_err().0;
    assert!(e.contains("did you mean `cycles`"), "{e}");
    let e = parse("context-switch").unwrap_err().0;
    assert!(e.contains("`context-switches`"), "{e}");
}
