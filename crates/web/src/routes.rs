//! The UI's routes, Locust's where Locust has one, answered as Locust
//! answers them: `GET /` (cicada's page, or Locust's own with `--web-ui`,
//! its files under `/assets/`), `GET /stats/requests`,
//! `/stats/requests/csv`, `/stats/failures/csv`, `/stats/report` (the
//! HTML report so far), `/exceptions`, `/exceptions/csv`, `/tasks`,
//! `/logs`, `/worker-count`, and the control routes `POST /swarm`, and
//! `/stop` and `/stats/reset` by GET (Locust up to 2.46 and its scripts) or
//! POST (Locust 2.47 on). cicada's own: `/cicada` (its page),
//! `/stats/history` (chart points), `/result.json` and `/summary.csv`
//! (downloads). Every request passes `auth` first.

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde_json::json;

use super::auth::Pass;
use super::state::RunState;
use super::{Control, Edit, ResetAsk, Shared, SteerAsk, SwarmAsk, form, locust, page, stats};
use cicada_results::RunResult;
use cicada_results::html::{self, Page};

/// Largest request body read (a start form is a few hundred bytes).
const MAX_BODY: usize = 64 * 1024;

type Resp = Response<Full<Bytes>>;

fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    resp
}

fn json_reply(status: StatusCode, v: &serde_json::Value) -> Resp {
    reply(status, "application/json", v.to_string())
}

fn text(status: StatusCode, body: impl Into<String>) -> Resp {
    reply(status, "text/plain; charset=utf-8", body.into())
}

fn download(content_type: &'static str, name: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = reply(StatusCode::OK, content_type, body);
    r.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(match name {
            "result.json" => "attachment; filename=\"result.json\"",
            "summary.csv" => "attachment; filename=\"summary.csv\"",
            "requests.csv" => "attachment; filename=\"requests.csv\"",
            "exceptions.csv" => "attachment; filename=\"exceptions.csv\"",
            "report.html" => "attachment; filename=\"report.html\"",
            _ => "attachment; filename=\"failures.csv\"",
        }),
    );
    r
}

/// 405, with the methods the route takes.
fn wrong_method(allow: &'static str) -> Resp {
    let mut r = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("this route takes {allow}\n"),
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// `GET /`: Locust's page with the run's template arguments (`--web-ui`),
/// else cicada's; with the token's cookie when the token came in the query.
fn front_page(shared: &Shared, pass: Pass, cicadas: bool) -> Resp {
    let body = match (&shared.ui, cicadas) {
        (Some(ui), false) => ui.page(&locust::template_args(&shared.feed.lock())),
        _ => page::html(),
    };
    let mut r = reply(StatusCode::OK, "text/html; charset=utf-8", body);
    if pass == Pass::SetCookie
        && let Some(c) = shared.guard.cookie_header()
        && let Ok(v) = HeaderValue::from_str(&c)
    {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// Answer one request.
pub async fn respond(req: Request<Incoming>, shared: &Shared) -> Resp {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query();
    let pass = match shared
        .guard
        .check(&parts.method, &path, query, &parts.headers)
    {
        Ok(p) => p,
        Err(refusal) => {
            let mut r = text(refusal.status, format!("{}\n", refusal.why));
            if refusal.status == StatusCode::UNAUTHORIZED {
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            return r;
        }
    };
    // HEAD reads as GET does (the body is left out), but never acts
    let method = match parts.method {
        Method::HEAD if !matches!(path.as_str(), "/stop" | "/stats/reset" | "/swarm") => {
            Method::GET
        }
        ref m => m.clone(),
    };
    match (method, path.as_str()) {
        (Method::GET, "/") => front_page(shared, pass, false),
        (Method::GET, "/cicada") => front_page(shared, pass, true),
        // Locust up to 2.46 (page and scripts) sends GET, 2.47 on POST
        (Method::GET, "/stop") => stop(shared, "GET /stop"),
        (Method::POST, "/stop") => stop(shared, "POST /stop"),
        (Method::GET | Method::POST, "/stats/reset") => reset(shared).await,
        (Method::POST, "/swarm") => swarm(body, shared).await,
        (_, "/stop" | "/stats/reset") => wrong_method("GET, POST"),
        (_, "/swarm") => wrong_method("POST"),
        (Method::GET, _) => get(&path, query, shared),
        _ => wrong_method("GET"),
    }
}

/// `GET /assets/<name>`: a file of Locust's page (`--web-ui`).
fn asset(shared: &Shared, name: &str) -> Resp {
    match shared.ui.as_ref().and_then(|ui| ui.asset(name)) {
        Some((kind, bytes)) => reply(StatusCode::OK, kind, bytes),
        None => text(StatusCode::NOT_FOUND, "no such asset\n"),
    }
}

/// The read-only routes.
fn get(path: &str, query: Option<&str>, shared: &Shared) -> Resp {
    if let Some(name) = path.strip_prefix("/assets/") {
        return asset(shared, name);
    }
    let b = shared.feed.lock();
    match path {
        "/stats/requests" => json_reply(StatusCode::OK, &stats::requests(&b)),
        "/exceptions" => json_reply(StatusCode::OK, &locust::exceptions()),
        "/exceptions/csv" => download("text/csv", "exceptions.csv", locust::exceptions_csv()),
        "/tasks" => json_reply(StatusCode::OK, &locust::tasks(&b)),
        "/logs" => json_reply(StatusCode::OK, &locust::logs(&b)),
        "/worker-count" => json_reply(StatusCode::OK, &locust::worker_count(&b)),
        "/stats/requests_full_history/csv" => text(
            StatusCode::NOT_FOUND,
            "Error: Server was not started with option to generate full history. \
             (cicada: every interval is in /stats/history, and in the results)\n",
        ),
        "/stats/history" => {
            let from = query
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("from=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            json_reply(StatusCode::OK, &stats::history(&b, from))
        }
        "/stats/requests/csv" => download("text/csv", "requests.csv", stats::requests_csv(&b)),
        "/stats/failures/csv" => download("text/csv", "failures.csv", stats::failures_csv(&b)),
        "/stats/report" => {
            let steps: Vec<&RunResult> = b.finished.iter().chain(b.current.as_ref()).collect();
            let stages: Vec<&RunResult> = b.stages.iter().collect();
            let page = Page {
                steps: &steps,
                stages: if b.sweep { &[] } else { &stages },
                sweep: b.sweep,
                search: None,
            };
            let html = html::render(&page);
            // Locust's `?download=1` asks for an attachment
            let download_asked = query.is_some_and(|q| {
                q.split('&')
                    .any(|kv| kv.strip_prefix("download=").is_some_and(|v| !v.is_empty()))
            });
            if download_asked {
                download("text/html; charset=utf-8", "report.html", html)
            } else {
                reply(StatusCode::OK, "text/html; charset=utf-8", html)
            }
        }
        "/result.json" => match b.latest() {
            Some(r) => match serde_json::to_string_pretty(&cicada_results::json::document(r)) {
                Ok(doc) => download("application/json", "result.json", doc),
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
            },
            None => text(StatusCode::NOT_FOUND, "no step has started yet\n"),
        },
        "/summary.csv" => {
            let mut out = stats::csv_line(&cicada_results::csv::header());
            let rows = b.finished.iter().chain(b.current.as_ref());
            for row in rows.flat_map(cicada_results::csv::rows) {
                out.push_str(&stats::csv_line(&row));
            }
            download("text/csv", "summary.csv", out)
        }
        _ => text(StatusCode::NOT_FOUND, "no such route\n"),
    }
}

/// `/stop` (GET or POST): the run stops as on Ctrl-C (results are
/// written); Locust's answer.
fn stop(shared: &Shared, asked: &'static str) -> Resp {
    {
        let mut b = shared.feed.lock();
        if b.state == RunState::Running {
            b.state = RunState::Stopping;
        }
    }
    let _ = shared.stop.send(asked);
    json_reply(
        StatusCode::OK,
        &json!({"success": true, "message": "Test stopped"}),
    )
}

/// `POST /swarm`: start the run the form describes (only while ready).
async fn swarm(body: Incoming, shared: &Shared) -> Resp {
    let fail = |status, message: String| {
        json_reply(status, &json!({"success": false, "message": message}))
    };
    let state = shared.feed.lock().state;
    if !matches!(state, RunState::Ready | RunState::Running) {
        return fail(
            StatusCode::CONFLICT,
            format!("the run is {}: it takes no start or change", state.word()),
        );
    }
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => return fail(StatusCode::BAD_REQUEST, format!("reading the form: {e}")),
    };
    let fields = form::parse(&String::from_utf8_lossy(&bytes));
    if state == RunState::Running {
        return steer(&fields, shared).await;
    }
    let settings = match form::swarm_settings(&fields) {
        Ok(s) => s,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if shared
        .swarm
        .send(SwarmAsk {
            settings,
            reply: tx,
        })
        .await
        .is_err()
    {
        return fail(
            StatusCode::CONFLICT,
            "the run no longer takes a start".into(),
        );
    }
    match rx.await {
        Ok(Ok(())) => {
            let host = fields
                .iter()
                .find(|(k, _)| k == "host")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            json_reply(
                StatusCode::OK,
                &json!({"success": true, "message": "Swarming started", "host": host}),
            )
        }
        Ok(Err(e)) => fail(StatusCode::BAD_REQUEST, e.to_string()),
        Err(_) => fail(
            StatusCode::CONFLICT,
            "the run no longer takes a start".into(),
        ),
    }
}

/// `POST /swarm` while the run goes: change its users (and spawn rate), or
/// an open loop's rate (and cap), fleet-wide, from a stage boundary a moment ahead.
async fn steer(fields: &[(String, String)], shared: &Shared) -> Resp {
    let fail = |status, message: String| {
        json_reply(status, &json!({"success": false, "message": message}))
    };
    let edit = match form::steer_fields(fields) {
        Ok(v) => v,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let ask = SteerAsk { edit, reply };
    if shared.steer.send(Control::Change(ask)).await.is_err() {
        return fail(StatusCode::CONFLICT, "the run takes no change now".into());
    }
    match answer.await {
        Ok(Ok(message)) => {
            let host = locust::host(&shared.feed.lock());
            let mut body = json!({"success": true, "message": message, "host": host});
            match edit {
                Edit::Users { users, .. } => body["user_count"] = json!(users),
                Edit::Open {
                    rate,
                    max_concurrency,
                } => {
                    if let Some(r) = rate {
                        body["rate"] = if r.is_finite() {
                            json!(r)
                        } else {
                            json!("inf")
                        };
                    }
                    if let Some(c) = max_concurrency {
                        body["max_concurrency"] = json!(c);
                    }
                }
            }
            json_reply(StatusCode::OK, &body)
        }
        Ok(Err(e)) => fail(StatusCode::CONFLICT, e.to_string()),
        Err(_) => fail(StatusCode::CONFLICT, "the run takes no change now".into()),
    }
}

/// `/stats/reset` (GET or POST): the running step's figures start again
/// from the next interval (Locust's reset); the answer says from when.
async fn reset(shared: &Shared) -> Resp {
    let fail = |message: String| {
        json_reply(
            StatusCode::CONFLICT,
            &json!({"success": false, "message": message}),
        )
    };
    if shared.feed.lock().state != RunState::Running {
        return fail("nothing runs: there are no figures to reset".into());
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    if shared
        .steer
        .send(Control::Reset(ResetAsk { reply }))
        .await
        .is_err()
    {
        return fail("the run takes no reset now".into());
    }
    match answer.await {
        Ok(Ok(message)) => json_reply(
            StatusCode::OK,
            &json!({"success": true, "message": message}),
        ),
        Ok(Err(e)) => fail(e.to_string()),
        Err(_) => fail("the run takes no reset now".into()),
    }
}
