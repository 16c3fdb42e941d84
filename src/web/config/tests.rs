//! Tests of the web config: parsing, validation and the TLS files.

use super::*;

fn parse(y: &str) -> Result<WebConfigSpec, String> {
    WebConfigSpec::parse(y, Path::new("/etc/pe/web.yml")).map_err(|e| e.to_string())
}

#[test]
fn empty_and_plain() {
    assert_eq!(parse("").unwrap().tls, None);
    assert_eq!(parse("# nothing\n").unwrap().tls, None);
    // A TLS section without certificate, key, CA or auth type is plain
    // HTTP, as in exporter-toolkit.
    assert_eq!(
        parse("tls_server_config:\n  min_version: TLS13\n")
            .unwrap()
            .tls,
        None
    );
}

#[test]
fn tls_section() {
    let s = parse(
        "tls_server_config:\n  cert_file: s.crt\n  key_file: /abs/s.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA]\n  curve_preferences: [CurveP256, X25519]\n",
    )
    .unwrap();
    let t = s.tls.unwrap();
    assert_eq!(t.cert, Pem::File("/etc/pe/s.crt".into()));
    assert_eq!(t.key, Pem::File("/abs/s.key".into()));
    assert_eq!(t.client_ca, Some(Pem::File("/etc/pe/ca.crt".into())));
    assert_eq!(t.client_auth, ClientAuth::RequireAndVerifyClientCert);
    assert!(!t.tls12 && t.tls13);
    assert_eq!(
        t.cipher_suites,
        vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
    );
    assert_eq!(t.curves, vec![NamedGroup::secp256r1, NamedGroup::X25519]);
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
}

#[test]
fn refusals() {
    for (y, want) in [
        ("tls_server_config:\n  cert_file: a\n", "missing one of key or key_file"),
        ("tls_server_config:\n  key_file: a\n", "missing one of cert or cert_file"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Sometimes\n", "invalid ClientAuth"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n", "without a Client Auth Policy"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n", "unknown TLS version"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n", "above max_version"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_MADE_UP]\n", "unknown cipher"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [CurveP999]\n", "unknown curve"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n", "client_allowed_sans requires"),
        ("tls_server_config:\n  cert_file: a\n  cert: b\n  key_file: c\n", "not both"),
        ("tls_server_config:\n  cert_fil: a\n", "web.yml:2:"),
        ("basic_auth_users:\n  alice: hunter2\n", "not a bcrypt hash"),
        ("http_server_config:\n  headers:\n    X-Powered-By: me\n", "can not be configured"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "invalid value for X-Frame-Options"),
        ("rate_limit:\n  interval: 1s\n", "burst must be at least 1"),
        (
            "basic_auth_users:\n  \"a:b\": $2b$10$m4.EwsgG0LcS5fkGoUOhsOc6K3kFIxm9WJ7g/5gGTmI1BA7OQ.Wx.\n",
            "contains `:`",
        ),
        ("rate_limit:\n  interval: 1 parsec\n  burst: 1\n", "not a duration"),
        // Issue 11: cost 31 (hours per login) was accepted; 17 is
        // refused with the bound, 16 is accepted (below).
        (
            "basic_auth_users:\n  alice: $2b$31$m4.EwsgG0LcS5fkGoUOhsOc6K3kFIxm9WJ7g/5gGTmI1BA7OQ.Wx.\n",
            "the bcrypt cost of `alice` is 31; it must be 4 to 16",
        ),
        (
            "basic_auth_users:\n  alice: $2b$17$m4.EwsgG0LcS5fkGoUOhsOc6K3kFIxm9WJ7g/5gGTmI1BA7OQ.Wx.\n",
            "the bcrypt cost of `alice` is 17; it must be 4 to 16",
        ),
        (
            "basic_auth_users:\n  alice: $2b$03$m4.EwsgG0LcS5fkGoUOhsOc6K3kFIxm9WJ7g/5gGTmI1BA7OQ.Wx.\n",
            "the bcrypt cost of `alice` is 3; it must be 4 to 16",
        ),
        ("nonsense: 1\n", "web.yml:1:"),
    ] {
        let e = parse(y).expect_err(y);
        assert!(e.contains(want), "{y}: {e}");
    }
}

#[test]
fn the_highest_accepted_bcrypt_cost_is_16() {
    let y = "basic_auth_users:\n  alice: $2b$16$m4.EwsgG0LcS5fkGoUOhsOc6K3kFIxm9WJ7g/5gGTmI1BA7OQ.Wx.\n";
    assert_eq!(parse(y).expect("cost 16").users.len(), 1);
}

#[test]
fn users_headers_rate_limit() {
    let s = parse(
        "basic_auth_users:\n  alice: $2b$10$m4.EwsgG0LcS5fkGoUOhsOc6K3kFIxm9WJ7g/5gGTmI1BA7OQ.Wx.\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n    Content-Security-Policy: \"\"\nrate_limit:\n  interval: 100ms\n  burst: 5\n",
    )
    .unwrap();
    assert_eq!(s.users.len(), 1);
    assert_eq!(s.headers, vec![("X-Frame-Options".into(), "deny".into())]);
    assert_eq!(
        s.rate_limit,
        Some(RateLimit {
            interval: Duration::from_millis(100),
            burst: 5
        })
    );
}

#[test]
fn yaml_errors_name_the_place_once() {
    let e = parse("tls_server_config:\n  cert_fil: a\n").unwrap_err();
    assert!(
        e.starts_with("/etc/pe/web.yml:2:3: unknown field `cert_fil`"),
        "{e}"
    );
    assert_eq!(strip_location("error: line 2 column 3: x: y"), "x: y");
    assert_eq!(strip_location("plain"), "plain");
}

#[test]
fn go_durations() {
    assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
    assert_eq!(parse_go_duration("1s"), Ok(Duration::from_secs(1)));
    assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
    assert!(parse_go_duration("s").is_err());
    assert!(parse_go_duration("1").is_err());
    assert!(parse_go_duration("1x").is_err());
    assert!(parse_go_duration("1e400h").is_err());
}
