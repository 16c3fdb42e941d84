//! The `Origin` check of the `/api/v1/stream` upgrade (cross-site
//! WebSocket hijacking). Browsers send `Origin` on every WebSocket
//! upgrade and do not apply CORS to WebSockets: without this check, a page
//! of any site could read the live frames with the visitor's cached basic
//! auth, or from a loopback exporter. So an upgrade that carries `Origin`
//! must come from the exporter's own origin (the scheme it serves, and the
//! request's `Host`, port included) or from one of
//! `--web.allowed-origins`; others get 403. A request without `Origin` is
//! not from a browser page and is let through (curl, websocat, scripts).

/// An origin, `scheme://host[:port]`, in the form compared: scheme and
/// host lowercased, the scheme's default port left out. `None` when `s`
/// is not an `http` or `https` origin (a path, user info, `null`).
pub fn normalize(s: &str) -> Option<String> {
    let s = s.trim();
    let (scheme, rest) = s.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = host_port(authority)?;
    let host = host.to_ascii_lowercase();
    Some(match port {
        Some(p) if p != default_port => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// `host[:port]` or `[v6][:port]`: the host and the port when given.
fn host_port(a: &str) -> Option<(&str, Option<u16>)> {
    if a.is_empty() || a.contains(['/', '@', '?', '#']) || a.chars().any(|c| c.is_whitespace()) {
        return None;
    }
    let (host, port) = if let Some(v6) = a.strip_prefix('[') {
        let (inside, after) = v6.split_once(']')?;
        if inside.is_empty()
            || !inside
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return None;
        }
        let host = &a[..inside.len() + 2];
        match after {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':')?)),
        }
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    if host.is_empty() || (!host.starts_with('[') && host.contains(':')) {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host, port))
}

/// `--web.allowed-origins`'s value parser: an `http` or `https` origin,
/// normalized.
pub fn parse_allowed(s: &str) -> Result<String, String> {
    normalize(s).ok_or_else(|| {
        format!(
            "`{s}` is not an origin: give scheme://host[:port], e.g. https://grafana.example.com"
        )
    })
}

/// Whether an upgrade with `origin` (the header's value) may go on:
/// `https` tells the scheme the exporter serves, `host` the request's
/// `Host` header, `allowed` the normalized `--web.allowed-origins`.
pub fn allowed(origin: &str, https: bool, host: Option<&str>, allowed: &[String]) -> bool {
    let Some(o) = normalize(origin) else {
        return false;
    };
    if allowed.contains(&o) {
        return true;
    }
    let scheme = if https { "https" } else { "http" };
    host.and_then(|h| normalize(&format!("{scheme}://{h}")))
        .is_some_and(|own| own == o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_normalize() {
        assert_eq!(
            normalize("HTTP://LocalHost:80").as_deref(),
            Some("http://localhost")
        );
        assert_eq!(
            normalize("https://a.example:443/").as_deref(),
            Some("https://a.example")
        );
        assert_eq!(
            normalize("http://[::1]:9659").as_deref(),
            Some("http://[::1]:9659")
        );
        for bad in [
            "null",
            "",
            "ws://a",
            "http://",
            "http://a/b",
            "http://u@a",
            "http://a:x",
            "http://a:70000",
            "http://::1",
            "http://[zz]",
        ] {
            assert_eq!(normalize(bad), None, "{bad}");
        }
    }

    #[test]
    fn same_origin_scheme_and_port_included() {
        let host = Some("127.0.0.1:9659");
        assert!(allowed("http://127.0.0.1:9659", false, host, &[]));
        // Another port, another scheme, another host: refused.
        assert!(!allowed("http://127.0.0.1:8080", false, host, &[]));
        assert!(!allowed("https://127.0.0.1:9659", false, host, &[]));
        assert!(!allowed("http://127.0.0.1:9659", true, host, &[]));
        assert!(!allowed("http://evil.example", false, host, &[]));
        assert!(!allowed("null", false, host, &[]));
        // No Host: only the list.
        assert!(!allowed("http://127.0.0.1:9659", false, None, &[]));
        let list = vec![parse_allowed("https://Dash.example:443").unwrap()];
        assert!(allowed("https://dash.example", false, host, &list));
        assert!(!allowed("http://dash.example", false, host, &list));
        let e = parse_allowed("dash.example").unwrap_err();
        assert!(e.contains("scheme://host[:port]"), "{e}");
    }
}
