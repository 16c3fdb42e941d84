//! The table of OTLP settings: each setting's flag and environment
//! variables (most specific first), and how a value is looked up (the
//! flag, else the first variable set) and parsed (naming where it came
//! from on error).

use super::flags::{Env, OtlpFlags};
use super::OtlpError;

/// One setting: its flag and its environment variables, most specific
/// first.
pub(super) struct Setting {
    flag: &'static str,
    vars: &'static [&'static str],
}

pub(super) const METRICS_ENDPOINT: Setting = Setting {
    flag: "--otlp.metrics-endpoint",
    vars: &["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"],
};
pub(super) const ENDPOINT: Setting = Setting {
    flag: "--otlp.endpoint",
    vars: &["OTEL_EXPORTER_OTLP_ENDPOINT"],
};
pub(super) const PROTOCOL: Setting = Setting {
    flag: "--otlp.protocol",
    vars: &[
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ],
};
pub(super) const HEADERS: Setting = Setting {
    flag: "--otlp.headers",
    vars: &[
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ],
};
pub(super) const TIMEOUT: Setting = Setting {
    flag: "--otlp.timeout",
    vars: &[
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ],
};
pub(super) const INTERVAL: Setting = Setting {
    flag: "--otlp.interval",
    vars: &["OTEL_METRIC_EXPORT_INTERVAL"],
};
pub(super) const COMPRESSION: Setting = Setting {
    flag: "--otlp.compression",
    vars: &[
        "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
        "OTEL_EXPORTER_OTLP_COMPRESSION",
    ],
};
pub(super) const CERTIFICATE: Setting = Setting {
    flag: "--otlp.certificate",
    vars: &[
        "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
    ],
};
pub(super) const CLIENT_CERTIFICATE: Setting = Setting {
    flag: "--otlp.client-certificate",
    vars: &[
        "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    ],
};
pub(super) const CLIENT_KEY: Setting = Setting {
    flag: "--otlp.client-key",
    vars: &[
        "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    ],
};
pub(super) const RESOURCE_ATTRIBUTES: Setting = Setting {
    flag: "--otlp.resource-attributes",
    vars: &["OTEL_RESOURCE_ATTRIBUTES"],
};
pub(super) const SERVICE_NAME: Setting = Setting {
    flag: "--otlp.service-name",
    vars: &["OTEL_SERVICE_NAME"],
};

/// A value and where it came from (a flag or a variable's name).
#[derive(Debug, Clone)]
pub(super) struct Given {
    pub(super) value: String,
    pub(super) origin: &'static str,
    pub(super) from_flag: bool,
}

impl Given {
    /// Parses the value with the flag's or the variable's parser; an error
    /// names the origin.
    pub(super) fn parse<T>(
        &self,
        flag: fn(&str) -> Result<T, String>,
        var: fn(&str) -> Result<T, String>,
    ) -> Result<T, OtlpError> {
        let p = if self.from_flag { flag } else { var };
        p(&self.value).map_err(|e| invalid(self.origin, e))
    }
}

pub(super) fn invalid(origin: &str, msg: impl Into<String>) -> OtlpError {
    OtlpError::Invalid {
        origin: origin.to_string(),
        msg: msg.into(),
    }
}

/// The flags and the environment, for the resolvers.
pub(super) struct Inputs<'a> {
    pub(super) flags: &'a OtlpFlags,
    pub(super) env: Env<'a>,
}

impl Inputs<'_> {
    /// The first variable of the setting that is set.
    pub(super) fn var(&self, s: &Setting) -> Option<Given> {
        s.vars.iter().find_map(|v| {
            (self.env)(v).map(|value| Given {
                value,
                origin: v,
                from_flag: false,
            })
        })
    }

    /// The flag's value when given, else [`Self::var`].
    pub(super) fn get(&self, s: &Setting, flag: Option<&str>) -> Option<Given> {
        match flag {
            Some(f) => Some(Given {
                value: f.to_string(),
                origin: s.flag,
                from_flag: true,
            }),
            None => self.var(s),
        }
    }
}
