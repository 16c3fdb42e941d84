//! The grammar's own cases: precedence, `if else`, functions, literals,
//! names, errors with the column, bounds; and perf's values.

use super::*;
use std::collections::BTreeMap;

fn p(s: &str) -> String {
    parse(s)
        .unwrap_or_else(|e| panic!("{s:?}: {e}"))
        .to_string()
}

fn err(s: &str) -> String {
    parse(s).expect_err(s).to_string()
}

fn val(s: &str, env: &Values) -> f64 {
    let e = parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
    eval(&e, env).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

#[test]
fn precedence_follows_perfs_left_levels() {
    assert_eq!(p("a + b * c"), "(a + (b * c))");
    assert_eq!(p("a - b - c"), "((a - b) - c)");
    assert_eq!(p("a / b * c % d"), "(((a / b) * c) % d)");
    assert_eq!(p("a < b + c"), "(a < (b + c))");
    assert_eq!(p("a & b < c"), "(a & (b < c))");
    assert_eq!(p("a | b ^ c & d"), "(a | (b ^ (c & d)))");
    assert_eq!(p("a > b > c"), "((a > b) > c)");
    // Unary minus binds tightest.
    assert_eq!(p("-a * b"), "((-a) * b)");
    assert_eq!(p("a - -b"), "(a - (-b))");
    assert_eq!(p("--a"), "(-(-a))");
    assert_eq!(p("(a + b) * c"), "((a + b) * c)");
}

#[test]
fn if_else_is_lowest_and_chains_to_the_right() {
    assert_eq!(p("a + b if c > 0 else d"), "((a + b) if (c > 0) else d)");
    assert_eq!(
        p("a if x else b if y else c"),
        "(a if x else (b if y else c))"
    );
    assert_eq!(p("(a if x else b) * 2"), "((a if x else b) * 2)");
    assert!(err("a if x").contains("`if` without `else`"));
    // The condition and function arguments take no bare `if`.
    assert!(err("a if b if c else d else e").contains("expected `else`"));
    let e = err("min(a if c else b, 1)");
    assert!(
        e.starts_with("column 7: ") && e.contains("parentheses"),
        "{e}"
    );
    assert_eq!(p("min((a if c else b), 1)"), "min((a if c else b), 1)");
    assert!(err("(a) if b else c if d").contains("without `else`"));
}

#[test]
fn functions_and_probes() {
    assert_eq!(p("d_ratio(a, b + c)"), "d_ratio(a, (b + c))");
    assert_eq!(p("max(a,min(b,c))"), "max(a, min(b, c))");
    assert_eq!(
        p("source_count(uncore_imc@cas_count_read@)"),
        "source_count(uncore_imc@cas_count_read@)"
    );
    assert_eq!(
        p("has_event(cpu_core@topdown\\-retiring@)"),
        "has_event(cpu_core@topdown\\-retiring@)"
    );
    assert_eq!(
        p("strcmp_cpuid_str(0x410fd493)"),
        "strcmp_cpuid_str(0x410fd493)"
    );
    assert!(err("has_event(1 + 2)").contains("`has_event` takes one event name"));
    assert!(err("min(a)").contains("expected `,` between the arguments of `min`"));
    assert!(err("max(a, b").contains("ends where `)` was expected"));
}

#[test]
fn numbers_as_perf_lexes_them() {
    for (s, v) in [
        ("12", 12.0),
        ("1.5", 1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1e3),
        ("2.5e-3", 2.5e-3),
        ("1e9", 1e9),
    ] {
        assert_eq!(parse(s).unwrap(), Expr::Number(v), "{s}");
    }
    // Longest match: a letter after the digits makes a name.
    let name = |s: &str| match parse(s).unwrap() {
        Expr::Operand(o) => o.name,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(name("1e3x"), "1e3x");
    assert_eq!(name("1E3"), "1E3");
    assert_eq!(name("10k"), "10k");
    assert_eq!(name("maxx"), "maxx");
    assert_eq!(name("iffy"), "iffy");
    assert!(err("1e999").contains("out of the range"));
    assert!(err("1e-999").contains("out of the range"));
}

#[test]
fn literals_known_and_refused() {
    assert_eq!(parse("#smt_on").unwrap(), Expr::Literal(Literal::SmtOn));
    assert_eq!(
        parse("#NUM_CPUS_ONLINE").unwrap(),
        Expr::Literal(Literal::NumCpusOnline)
    );
    for l in Literal::ALL {
        assert_eq!(parse(&l.to_string()).unwrap(), Expr::Literal(l));
    }
    let e = err("a / #num_gpus");
    assert!(
        e.starts_with("column 5: unknown literal `#num_gpus`"),
        "{e}"
    );
    assert!(e.contains("`#num_cpus_online`"), "{e}");
    assert!(err("#duration_time").contains("write `duration_time` without the `#`"));
    let e = err("#smt_on-1");
    assert!(e.contains("write `#smt_on - ...` with spaces"), "{e}");
    assert_eq!(p("#smt_on - 1"), "(#smt_on - 1)");
    assert!(err("#").contains("none follows"));
}

#[test]
fn names_escapes_and_pmu_forms() {
    let ops = |s: &str| -> Vec<String> {
        parse(s)
            .unwrap()
            .operands()
            .into_iter()
            .map(|o| o.name.clone())
            .collect()
    };
    assert_eq!(
        ops("topdown\\-retiring / (topdown\\-fe\\-bound + topdown\\-retiring)"),
        ["topdown-retiring", "topdown-fe-bound"]
    );
    assert_eq!(
        ops("cpu@INST_RETIRED.ANY\\,cmask\\=1@ + L1-dcache-load-misses:u"),
        [
            "cpu@INST_RETIRED.ANY,cmask=1@",
            "L1",
            "dcache",
            "load",
            "misses:u"
        ]
    );
    // `-` ends a name unless escaped, as in perf.
    assert_eq!(p("L1-dcache"), "(L1 - dcache)");
    assert_eq!(
        p("L1\\-dcache\\-load\\-misses:u"),
        "L1\\-dcache\\-load\\-misses:u"
    );
    let e = parse("cpu@event=0x3c\\,umask=0@").unwrap_err().to_string();
    assert!(e.starts_with("column 10:"), "{e}");
    let e = parse("uncore_imc@cas_count_read@ * 64").unwrap();
    match &e {
        Expr::Binary(BinOp::Mul, a, _) => match a.as_ref() {
            Expr::Operand(o) => {
                assert_eq!(o.event_form(), "uncore_imc/cas_count_read/");
                assert_eq!(o.column, 1);
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert_eq!(
        ops("duration_time * 1e9 + has_event(x) + source_count(y)"),
        ["duration_time", "y"]
    );
}

#[test]
fn errors_carry_the_column() {
    for (s, col, what) in [
        ("", 1, "empty"),
        ("a +", 4, "ends where an operand"),
        ("a b", 3, "an operator is missing"),
        ("a)", 2, "without its `(`"),
        ("(a", 3, "`)`"),
        ("a == b", 3, "no `==`"),
        ("a = b", 3, "`=` is not in perf's expression grammar"),
        ("!a", 1, "`!`"),
        ("a \\x", 3, "backslash escapes only"),
        ("a else b", 3, "`else` without its `if`"),
        ("* a", 1, "`*` where an operand"),
    ] {
        let e = err(s);
        assert!(
            e.starts_with(&format!("column {col}: ")) && e.contains(what),
            "{s:?}: {e}"
        );
    }
}

#[test]
fn hostile_input_is_bounded() {
    let deep = format!("{}a{}", "(".repeat(5_000), ")".repeat(5_000));
    assert!(matches!(parse(&deep), Err(DeriveError::TooDeep { .. })));
    let negs = format!("{}a", "-".repeat(5_000));
    assert!(matches!(parse(&negs), Err(DeriveError::TooDeep { .. })));
    let chain = vec!["a"; 1000].join(" + ");
    assert!(matches!(parse(&chain), Err(DeriveError::TooDeep { .. })));
    let ifs = vec!["a if b else"; 1000].join(" ") + " c";
    assert!(matches!(parse(&ifs), Err(DeriveError::TooDeep { .. })));
    let long = "a".repeat(MAX_LEN + 1);
    assert_eq!(parse(&long), Err(DeriveError::TooLong { len: MAX_LEN + 1 }));
    // At the bound it parses.
    let ok = vec!["a"; MAX_DEPTH - 1].join(" + ");
    assert!(parse(&ok).is_ok());
}

#[test]
fn printing_parses_back_to_the_same_tree() {
    for s in [
        "a + b * -c % 3 if d < 1e-3 else max(e, d_ratio(f, g)) | h ^ i & j > k",
        "topdown\\-be\\-bound / (slots) + #slots * source_count(x@y\\=1@)",
        "1.5e-7 + .25 + 5. + strcmp_cpuid_str(0x410fd493) + has_event(z)",
    ] {
        let e = parse(s).unwrap();
        let printed = e.to_string();
        let back = parse(&printed).unwrap_or_else(|err| panic!("{printed}: {err}"));
        // Columns differ; the printed forms agree.
        assert_eq!(back.to_string(), printed);
    }
}

#[test]
fn values_follow_perf() {
    let env = Values::with([("a", 6.0), ("b", 4.0), ("zero", 0.0), ("neg", -7.5)])
        .literal(Literal::SmtOn, 1.0)
        .literal(Literal::NumCores, 8.0);
    assert_eq!(val("a + b * 2", &env), 14.0);
    assert_eq!(val("a / b", &env), 1.5);
    assert!(val("a / zero", &env).is_nan());
    assert!(val("a / (b - 4)", &env).is_nan());
    assert_eq!(val("d_ratio(a, zero)", &env), 0.0);
    assert_eq!(val("d_ratio(a, b)", &env), 1.5);
    assert_eq!(val("a % b", &env), 2.0);
    assert_eq!(val("neg % b", &env), -3.0);
    assert_eq!(val("7.9 % 2.5", &env), 1.0);
    assert_eq!(
        eval(&parse("a % zero").unwrap(), &env),
        Err(DeriveError::ModuloByZero)
    );
    assert_eq!(
        eval(&parse("a % 0.5").unwrap(), &env),
        Err(DeriveError::ModuloByZero)
    );
    assert_eq!(val("a > b", &env), 1.0);
    assert_eq!(val("a < b", &env), 0.0);
    assert_eq!(val("-a + b", &env), -2.0);
    assert_eq!(val("min(a, b) + max(a, b)", &env), 10.0);
    assert_eq!(val("a | zero", &env), 1.0);
    assert_eq!(val("zero | zero", &env), 0.0);
    assert_eq!(val("a & zero", &env), 0.0);
    assert_eq!(val("a & b", &env), 1.0);
    assert_eq!(val("a ^ b", &env), 0.0);
    assert_eq!(val("a ^ zero", &env), 1.0);
    // NaN: arithmetic propagates it; logic decides with a finite side.
    assert!(val("(a / zero) + 1", &env).is_nan());
    assert!(val("(a / zero) > 1", &env).is_nan());
    assert_eq!(val("(a / zero) | 1", &env), 1.0);
    assert!(val("(a / zero) | 0", &env).is_nan());
    assert_eq!(val("0 & (a / zero)", &env), 0.0);
    assert!(val("(a / zero) ^ 1", &env).is_nan());
    assert!(val("(a / zero) % 2", &env).is_nan());
    // min/max are perf's `a < b ? a : b`.
    assert_eq!(val("min(a / zero, 1)", &env), 1.0);
    assert!(val("min(1, a / zero)", &env).is_nan());
    // if: zero takes else, NaN takes then; only that branch is read.
    assert_eq!(val("a if #smt_on else b", &env), 6.0);
    assert_eq!(val("a if zero else b", &env), 4.0);
    assert_eq!(val("a if a / zero else b", &env), 6.0);
    assert_eq!(val("missing if zero else b", &env), 4.0);
    assert_eq!(val("a if has_event(missing) else b", &env), 4.0);
    assert_eq!(val("a if has_event(b) else missing", &env), 6.0);
    assert_eq!(val("#num_cores / 2", &env), 4.0);
    assert_eq!(val("source_count(a) * 3", &env), 3.0);
}

#[test]
fn missing_inputs_are_named() {
    let env = Values::with([("a", 1.0)]);
    let e = eval(&parse("a + b").unwrap(), &env).unwrap_err();
    assert_eq!(e, DeriveError::Missing("b".into()));
    assert_eq!(e.to_string(), "`b` has no value");
    let mut env = env;
    env.literals.insert(
        Literal::Slots,
        Err("perf knows `#slots` on arm64 only".into()),
    );
    let e = eval(&parse("a * #slots").unwrap(), &env).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the literal `#slots` has no value: perf knows `#slots` on arm64 only"
    );
    let e = eval(&parse("#smt_on").unwrap(), &env).unwrap_err();
    assert!(e.to_string().contains("`#smt_on`"), "{e}");
    let e = eval(&parse("strcmp_cpuid_str(0x410fd493)").unwrap(), &env).unwrap_err();
    assert!(e.to_string().contains("no CPU identity"), "{e}");
    env.cpuids.insert("0x410fd493".into(), true);
    assert_eq!(val("strcmp_cpuid_str(0x410fd493)", &env), 1.0);
}

/// The corpus (`tests/fixtures/metrics/`): real `MetricExpr` strings
/// from the kernel, each evaluated on hand-picked operands against a
/// hand-computed value.
#[test]
fn corpus_parses_and_evaluates() {
    let files = [
        (
            "sapphirerapids.txt",
            include_str!("../../tests/fixtures/metrics/sapphirerapids.txt"),
        ),
        (
            "amdzen4.txt",
            include_str!("../../tests/fixtures/metrics/amdzen4.txt"),
        ),
        (
            "neoverse-n2-v2.txt",
            include_str!("../../tests/fixtures/metrics/neoverse-n2-v2.txt"),
        ),
        (
            "skylakex.txt",
            include_str!("../../tests/fixtures/metrics/skylakex.txt"),
        ),
        (
            "icelakex.txt",
            include_str!("../../tests/fixtures/metrics/icelakex.txt"),
        ),
    ];
    let mut checked = 0;
    for (file, text) in files {
        let mut source = None;
        for record in text.split("\n\n") {
            let mut fields = BTreeMap::new();
            for line in record.lines().filter(|l| !l.starts_with('#')) {
                let (k, v) = line
                    .split_once(": ")
                    .unwrap_or_else(|| panic!("{file}: not `key: value`: {line}"));
                fields.insert(k, v);
            }
            if let Some(s) = fields.get("source") {
                source = Some(*s);
            }
            let Some(metric) = fields.get("metric") else {
                continue;
            };
            assert!(source.is_some(), "{file}: {metric} has no source");
            let field = |k: &str| {
                *fields
                    .get(k)
                    .unwrap_or_else(|| panic!("{file}: {metric}: no `{k}`"))
            };
            let expr = parse(field("expr")).unwrap_or_else(|e| panic!("{file}: {metric}: {e}"));
            let mut env = Values::default();
            for item in field("given").split_whitespace() {
                let (name, v) = item
                    .rsplit_once('=')
                    .unwrap_or_else(|| panic!("{file}: {metric}: {item}"));
                let v: f64 = v.parse().unwrap_or_else(|_| panic!("{file}: {item}"));
                if let Some(lit) = name.strip_prefix('#') {
                    let lit = Literal::from_name(lit).unwrap_or_else(|| panic!("{item}"));
                    env.literals.insert(lit, Ok(v));
                } else {
                    env.operands.insert(name.to_string(), v);
                }
            }
            let got = eval(&expr, &env).unwrap_or_else(|e| panic!("{file}: {metric}: {e}"));
            match field("want") {
                "nan" => assert!(got.is_nan(), "{file}: {metric}: {got}, want NaN"),
                want => {
                    let want: f64 = want.parse().unwrap_or_else(|_| panic!("{want}"));
                    let close = (got - want).abs() <= 1e-9 * want.abs().max(1.0);
                    assert!(close, "{file}: {metric}: {got}, want {want}");
                }
            }
            // The printed tree parses back to the same value.
            let again = parse(&expr.to_string()).unwrap_or_else(|e| panic!("{metric}: {e}"));
            let v2 = eval(&again, &env).unwrap_or_else(|e| panic!("{metric}: {e}"));
            assert!(v2 == got || (v2.is_nan() && got.is_nan()), "{metric}");
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} expressions");
}

#[test]
fn rename_keeps_everything_but_the_names_it_maps() {
    let src = r"100 * (cpu@L1D_PEND_MISS.FB_FULL\,cmask\=1@ / CPU_CLK_UNHALTED.THREAD) if #smt_on else min(INST_RETIRED.ANY, 1e3)";
    let mut seen = Vec::new();
    let out = crate::derive::rename(src, &mut |n| {
        seen.push(n.to_string());
        match n {
            "cpu@L1D_PEND_MISS.FB_FULL,cmask=1@" => Some("perf_fb_full_total".into()),
            "CPU_CLK_UNHALTED.THREAD" => Some("topdown-slots".into()),
            _ => None,
        }
    })
    .unwrap();
    assert_eq!(
        out,
        r"100 * (perf_fb_full_total / topdown\-slots) if #smt_on else min(INST_RETIRED.ANY, 1e3)"
    );
    assert_eq!(
        seen,
        [
            "cpu@L1D_PEND_MISS.FB_FULL,cmask=1@",
            "CPU_CLK_UNHALTED.THREAD",
            "INST_RETIRED.ANY"
        ]
    );
    assert!(crate::derive::rename("a $ b", &mut |_| None).is_err());
}

/// Constant folding ([`fold`]): literal subexpressions become their
/// value, the constants of a `*`/`/` chain one coefficient; nothing else.
#[test]
fn folding_combines_constants_only() {
    let f = |s: &str| to_source(&fold(&parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))));
    // The default's imported bandwidth: perf's formula under the
    // importer's MB/s -> B/s factor, over the bytes counter.
    assert_eq!(
        f("1000000 * ((perf_dram_read_bytes_total / 64) * 64 / 1e6 / duration_time)"),
        "perf_dram_read_bytes_total / duration_time"
    );
    // Skylake's top-down denominator over the scaled cycles.
    assert_eq!(f("a / (4 * (s / 4))"), "a / s");
    assert_eq!(
        f("( i - r + 4 * (c / 4) ) / (4 * (s / 4))"),
        "(i - r + c) / s"
    );
    // Literal subexpressions, with perf's semantics.
    assert_eq!(f("1 + 2 * 3"), "7");
    assert_eq!(f("2 - 3"), "-1");
    assert_eq!(f("1e3 * a / b"), "1000 * a / b");
    assert_eq!(f("a * (2 + 2)"), "4 * a");
    assert_eq!(f("d_ratio(1, 0) + a"), "0 + a");
    assert_eq!(f("max(1, 2) * a"), "2 * a");
    assert_eq!(f("a if 1 < 2 else b"), "a if 1 else b");
    assert_eq!(f("(5 if 0 else 6) * a / 3"), "2 * a");
    assert_eq!(f("-(2) * a"), "-2 * a");
    assert_eq!(f("a / 2 / 2"), "a / 4");
    assert_eq!(f("a / 64"), "a / 64");
    assert_eq!(f("2 * a / 3"), "2 * a / 3");
    assert_eq!(f("2 / a * 3"), "6 / a");
    assert_eq!(f("a * 64 / 64 / b"), "a / b");
    // The non-constant factors keep their order and grouping.
    assert_eq!(f("a / b * c"), "a / b * c");
    assert_eq!(f("a / (b * c)"), "a / (b * c)");
    assert_eq!(f("2 * a * b / 2"), "a * b");
    // Never dropped: a zero factor (perf's `+ 0*SLOTS`), a division by
    // zero, a literal of the host, an operand, `x - x`, `x / x`.
    assert_eq!(f("a / b + 0 * s"), "a / b + 0 * s");
    assert_eq!(f("a / 0 * 2"), "2 * a / 0");
    assert_eq!(f("1 / 0"), "1 / 0");
    assert_eq!(f("5 % 0"), "5 % 0");
    assert_eq!(f("a * #smt_on / 2 * 2"), "a * #smt_on");
    assert_eq!(f("a - a"), "a - a");
    assert_eq!(f("a / a"), "a / a");
    assert_eq!(f("has_event(x) * 2 / 2"), "has_event(x)");
    // Nothing to fold: the same tree.
    for s in [
        "a + b * c",
        "a / b - c / b",
        "d_ratio(a, b)",
        "min(a, b) if c > 0 else d",
    ] {
        let e = parse(s).unwrap();
        assert_eq!(fold(&e), e, "{s}");
    }
}

/// Folded values: exactly the unfolded ones where the constants are
/// powers of two, within rounding otherwise.
#[test]
fn folding_keeps_the_values() {
    let env = Values::with([
        ("a", 3.0e9),
        ("b", 7.0),
        ("s", 1.25e10),
        ("duration_time", 1.5),
    ]);
    for (src, exact) in [
        ("1000000 * ((a / 64) * 64 / 1e6 / duration_time)", false),
        ("a / (4 * (s / 4))", true),
        ("a / 64 * 64", true),
        ("1e3 * a / s", true),
        ("a / 3 * 3 / b", false),
        ("d_ratio(a * 2, s * 2) + max(1, 0)", true),
    ] {
        let e = parse(src).unwrap();
        let (v, w) = (eval(&e, &env).unwrap(), eval(&fold(&e), &env).unwrap());
        if exact {
            assert_eq!(v.to_bits(), w.to_bits(), "{src}: {v} vs {w}");
        } else {
            assert!(
                (v - w).abs() <= 4.0 * f64::EPSILON * v.abs(),
                "{src}: {v} vs {w}"
            );
        }
    }
}

/// The minimal-parentheses form parses back to the same tree.
#[test]
fn source_form_parses_back() {
    for s in [
        "a - (b - c)",
        "a / (b / c)",
        "(a + b) * c",
        "-(a + b)",
        "a - -b",
        "(a if b else c) + 1",
        "a if (b if c else d) else e if f else g",
        "(a < b) < c",
        "a < (b < c)",
        "min(a + b, c) * d_ratio(x, y)",
        "a | b & c ^ d",
        "(a | b) & c",
    ] {
        let e = parse(s).unwrap();
        let back = parse(&to_source(&e)).unwrap_or_else(|err| panic!("{s}: {err}"));
        assert_eq!(back.to_string(), e.to_string(), "{s} -> {}", to_source(&e));
    }
}
