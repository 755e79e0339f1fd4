//! `POST /swarm`'s form: Locust's fields (`user_count`, `spawn_rate`,
//! `host`, `run_time`) and cicada's (`rate`, `max_concurrency`,
//! `duration`, `num_prompts`), each checked and turned into the typed
//! setting of the scenario key it stands for, so the scenario's own
//! validation has the last word (and blames the form's field).

use cicada_scenarios::Setting;
use toml::Value;

use super::Edit;

/// A form field the run cannot take, or a change that asks for nothing
/// (or for two kinds at once); the message starts with the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    /// A count that is not a whole number above 0.
    #[error("{field}: `{value}` is not a whole number above 0")]
    NotWhole { field: String, value: String },
    /// A rate that is not a number above 0.
    #[error("{field}: `{value}` is not a number above 0")]
    NotPositive { field: String, value: String },
    /// A run time that is not a duration.
    #[error("{field}: `{value}` is not a duration such as 30s or 5m")]
    NotDuration { field: String, value: String },
    /// A host that is not an http(s) URL.
    #[error("host: `{value}` is not an http:// or https:// URL")]
    NotUrl { value: String },
    /// A change of users beside a change of rate or cap.
    #[error(
        "user_count: a change is of users (closed loop) or of rate and \
         max_concurrency (open loop), not both"
    )]
    UsersAndRate,
    /// A change with nothing to change.
    #[error(
        "user_count: a change while the run goes needs it (closed loop), \
         or rate or max_concurrency (open loop)"
    )]
    NoChange,
}

/// `a=1&b=x%20y` -> `[("a", "1"), ("b", "x y")]` (`+` is a space).
pub fn parse(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'+', _) => out.push(b' '),
            (b'%', Some(b)) => {
                out.push(b);
                i += 2;
            }
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The settings a start form asks for, as typed values the scenario takes
/// (never `--set` text to parse again); an error names the field at fault.
pub fn swarm_settings(fields: &[(String, String)]) -> Result<Vec<Setting>, FormError> {
    let mut out = Vec::new();
    for (field, value) in fields {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        let int = |n: u32| Value::Integer(i64::from(n));
        let (key, typed) = match field.as_str() {
            "user_count" => ("load.users", int(whole(field, value)?)),
            "spawn_rate" => ("load.spawn_rate", Value::Float(positive(field, value)?)),
            "max_concurrency" => ("load.max_concurrency", int(whole(field, value)?)),
            "num_prompts" => ("load.num_prompts", int(whole(field, value)?)),
            "rate" | "request_rate" if value.eq_ignore_ascii_case("inf") => {
                ("load.request_rate", Value::String("inf".into()))
            }
            "rate" | "request_rate" => ("load.request_rate", Value::Float(positive(field, value)?)),
            "run_time" | "duration" => ("load.duration", Value::String(span(field, value)?)),
            "host" => ("target.base_url", Value::String(url(value)?)),
            // Locust's other fields (user classes, tags) have no meaning here
            _ => continue,
        };
        out.push(Setting {
            key: key.to_string(),
            value: typed,
            source: format!("{field}={value}"),
            origin: format!("the web UI's start form ({field})"),
        });
    }
    Ok(out)
}

/// A change of a running load: a closed loop's `user_count` (and
/// `spawn_rate`), or an open loop's `rate` (alias `request_rate`, `inf`
/// allowed) and/or `max_concurrency`; never both kinds at once.
pub fn steer_fields(fields: &[(String, String)]) -> Result<Edit, FormError> {
    let (mut users, mut spawn_rate, mut rate, mut cap) = (None, None, None, None);
    for (key, value) in fields {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        match key.as_str() {
            "user_count" => users = Some(whole(key, value)?),
            "spawn_rate" => spawn_rate = Some(positive(key, value)?),
            "rate" | "request_rate" if value.eq_ignore_ascii_case("inf") => {
                rate = Some(f64::INFINITY);
            }
            "rate" | "request_rate" => rate = Some(positive(key, value)?),
            "max_concurrency" => cap = Some(whole(key, value)?),
            _ => {}
        }
    }
    match (users, rate.is_some() || cap.is_some()) {
        (Some(_), true) => Err(FormError::UsersAndRate),
        (Some(users), false) => Ok(Edit::Users { users, spawn_rate }),
        (None, true) => Ok(Edit::Open {
            rate,
            max_concurrency: cap,
        }),
        (None, false) => Err(FormError::NoChange),
    }
}

fn whole(key: &str, v: &str) -> Result<u32, FormError> {
    v.parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| FormError::NotWhole {
            field: key.into(),
            value: v.into(),
        })
}

fn positive(key: &str, v: &str) -> Result<f64, FormError> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| FormError::NotPositive {
            field: key.into(),
            value: v.into(),
        })
}

fn span(key: &str, v: &str) -> Result<String, FormError> {
    let ok = v.len() <= 32
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == ' ');
    if ok && v.starts_with(|c: char| c.is_ascii_digit()) {
        Ok(v.to_string())
    } else {
        Err(FormError::NotDuration {
            field: key.into(),
            value: v.into(),
        })
    }
}

fn url(v: &str) -> Result<String, FormError> {
    let ok = (v.starts_with("http://") || v.starts_with("https://"))
        && v.len() <= 2048
        && !v.contains(|c: char| c == '"' || c == '\\' || c.is_control() || c == ' ');
    if ok {
        Ok(v.trim_end_matches('/').to_string())
    } else {
        Err(FormError::NotUrl { value: v.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locust_fields_become_overrides() {
        let f = parse(
            "user_count=8&spawn_rate=2.5&host=http%3A%2F%2F127.0.0.1%3A8000%2F&user_classes=X&run_time=30s",
        );
        let typed = |f: &[(String, String)]| -> Vec<(String, Value)> {
            swarm_settings(f)
                .unwrap()
                .into_iter()
                .map(|s| (s.key, s.value))
                .collect()
        };
        let kv = |k: &str, v: Value| (k.to_string(), v);
        assert_eq!(
            typed(&f),
            [
                kv("load.users", Value::Integer(8)),
                kv("load.spawn_rate", Value::Float(2.5)),
                kv(
                    "target.base_url",
                    Value::String("http://127.0.0.1:8000".into())
                ),
                kv("load.duration", Value::String("30s".into())),
            ]
        );
        let f = parse("rate=inf&max_concurrency=16&user_count=");
        assert_eq!(
            typed(&f),
            [
                kv("load.request_rate", Value::String("inf".into())),
                kv("load.max_concurrency", Value::Integer(16)),
            ]
        );
        let s = &swarm_settings(&parse("rate=2")).unwrap()[0];
        assert_eq!(
            (s.source.as_str(), s.origin.as_str()),
            ("rate=2", "the web UI's start form (rate)")
        );
        assert_eq!(parse("a=x+y%21%zz%4")[0].1, "x y!%zz%4");
    }

    #[test]
    fn bad_values_name_their_field() {
        for (body, field) in [
            ("user_count=-1", "user_count"),
            ("spawn_rate=0", "spawn_rate"),
            ("host=ftp://x", "host"),
            ("host=http://x\"%0a", "host"),
            ("run_time=1s\"%0ax=1", "run_time"),
        ] {
            let e = swarm_settings(&parse(body)).unwrap_err();
            assert!(e.to_string().starts_with(field), "{body}: {e}");
        }
    }

    #[test]
    fn a_change_is_of_users_or_of_rate_and_cap() {
        let f = parse("user_count=12&spawn_rate=3&host=x");
        let users = Edit::Users {
            users: 12,
            spawn_rate: Some(3.0),
        };
        assert_eq!(steer_fields(&f), Ok(users));
        assert_eq!(
            steer_fields(&parse("spawn_rate=3")),
            Err(FormError::NoChange)
        );
        let e = steer_fields(&parse("user_count=2&rate=5")).unwrap_err();
        assert_eq!(e, FormError::UsersAndRate);
        assert!(e.to_string().starts_with("user_count:"), "{e}");
        let open = |rate, max_concurrency| {
            Ok(Edit::Open {
                rate,
                max_concurrency,
            })
        };
        assert_eq!(
            steer_fields(&parse("rate=7.5&user_count=")),
            open(Some(7.5), None)
        );
        assert_eq!(
            steer_fields(&parse("request_rate=INF&max_concurrency=4")),
            open(Some(f64::INFINITY), Some(4))
        );
        assert_eq!(
            steer_fields(&parse("max_concurrency=9")),
            open(None, Some(9))
        );
        for body in ["rate=0", "rate=-2", "rate=x", "max_concurrency=0"] {
            let e = steer_fields(&parse(body)).unwrap_err();
            let field = body.split('=').next().unwrap();
            assert!(e.to_string().starts_with(field), "{body}: {e}");
        }
    }
}
