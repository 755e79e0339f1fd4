//! The server-hook routes of vLLM and SGLang, so the coordinator's
//! `[hooks]` can be tested against known truth: `POST /reset_prefix_cache`
//! (vLLM; answers `{"success": true}`) and `POST /flush_cache` (SGLang)
//! empty the simulated prefix cache; `POST /start_profile` and
//! `POST /stop_profile` only answer. Each call is logged with what the
//! mock had served when it came (`GET /mock/hooks`), and `hook_status`
//! makes them fail with that status instead (after the first
//! `hook_ok_calls` calls).

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::reply::{ResponseBody, Shared, error_json, full, json};
use crate::stats::LoggedHook;
use http::StatusCode;

/// Whether `path` is one of the hook routes.
pub(crate) fn is_hook(path: &str) -> bool {
    matches!(
        path,
        "/reset_prefix_cache" | "/flush_cache" | "/start_profile" | "/stop_profile"
    )
}

/// Answer a hook route (POST `path`), and log it.
pub(crate) fn serve(shared: &Shared, path: &str, authorized: bool) -> http::Response<ResponseBody> {
    let state = &shared.state;
    let Ok(mut log) = state.hooks.lock() else {
        return error_json(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the hook log is poisoned",
        );
    };
    let failing = shared
        .config
        .hook_status
        .filter(|_| log.len() >= shared.config.hook_ok_calls as usize)
        .and_then(|s| StatusCode::from_u16(s).ok());
    let resp = match (failing, authorized) {
        (_, false) => json(StatusCode::UNAUTHORIZED, r#"{"error":"Unauthorized"}"#),
        (Some(status), true) => {
            error_json(status, "the mock fails its hooks on purpose (hook_status)")
        }
        (None, true) => match path {
            "/reset_prefix_cache" => {
                state.prefix.clear();
                json(StatusCode::OK, r#"{"success":true}"#)
            }
            "/flush_cache" => {
                state.prefix.clear();
                full(StatusCode::OK, "text/plain", "Cache flushed.\n")
            }
            _ => full(StatusCode::OK, "text/plain", ""),
        },
    };
    let logged = LoggedHook {
        route: path.to_string(),
        status: resp.status().as_u16(),
        requests: state.requests.load(Ordering::Relaxed),
        completed: state.completed.load(Ordering::Relaxed),
        in_flight: state.in_flight.load(Ordering::Relaxed),
        unix_us: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
        authorized,
    };
    log.push(logged);
    resp
}

/// `GET /mock/hooks`: every hook call so far, in order.
pub(crate) fn listing(shared: &Shared) -> http::Response<ResponseBody> {
    let hooks = shared
        .state
        .hooks
        .lock()
        .map(|h| h.clone())
        .unwrap_or_default();
    match serde_json::to_string(&hooks) {
        Ok(s) => json(StatusCode::OK, s),
        Err(e) => error_json(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}
