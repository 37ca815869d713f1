//! The HTTP side: axum on a multi-threaded tokio runtime. Every request is checked for the
//! token first; the page's files are answered from memory; questions to the engine run on
//! the blocking pool, the analysis passes among them at most one per core at a time (so a
//! long pass never holds a timeline view or `meta`, which take no permit), and a question
//! whose slot saw a newer one while it waited is answered 204 without being computed
//! ([`crate::supersede`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, Response, StatusCode, Uri};
use tokio::sync::Semaphore;

use crate::api::App;
use crate::assets;
use crate::params::Params;
use crate::supersede::Slots;

pub struct Shared {
    pub app: Arc<App>,
    pub token: String,
    slots: Slots,
    /// One permit per core for the analysis passes.
    passes: Semaphore,
}

impl Shared {
    pub fn new(app: Arc<App>, token: String, cores: usize) -> Shared {
        Shared {
            app,
            token,
            slots: Slots::default(),
            passes: Semaphore::new(cores.max(1)),
        }
    }
}

pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(shared)
}

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:";

fn respond(status: u16, ctype: &'static str, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    r
}

const TEXT: &str = "text/plain; charset=utf-8";

async fn handle(State(s): State<Arc<Shared>>, uri: Uri) -> Response<Body> {
    let path = uri.path();
    let query = uri.query().unwrap_or("").to_string();
    let Some(after) = path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(s.token.as_str()))
    else {
        return forbidden();
    };
    // The URL as printed but for its final slash: the page's files are relative to the
    // token's directory, so send the browser there (else they resolve outside it).
    if after.is_empty() {
        let mut r = respond(
            308,
            TEXT,
            b"308: the page is at the URL with a final slash\n".to_vec(),
        );
        let to = format!("/{}/", s.token);
        if let Ok(v) = HeaderValue::from_str(&to) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        return r;
    }
    let Some(rest) = after.strip_prefix('/') else {
        return forbidden();
    };
    if let Some((ctype, body)) = assets::find(rest) {
        return respond(200, ctype, body.as_bytes().to_vec());
    }
    let Some(ep) = rest.strip_prefix("api/") else {
        return respond(404, TEXT, b"404 not found\n".to_vec());
    };
    let ep = ep.to_string();
    let params = match Params::parse(&query) {
        Ok(p) => p,
        Err(e) => return json(crate::api::Answer::bad(&e)),
    };
    let ticket = s.slots.ticket(
        params.get("slot"),
        params.get("seq").and_then(|x| x.parse().ok()),
    );
    let _permit = match App::is_pass(&ep) {
        true => match s.passes.acquire().await {
            Ok(p) => Some(p),
            Err(_) => return respond(503, TEXT, b"503 the server is stopping\n".to_vec()),
        },
        false => None,
    };
    if ticket.cancelled() {
        return json(crate::api::Answer::superseded());
    }
    let app = s.app.clone();
    match tokio::task::spawn_blocking(move || app.answer(&ep, &params, &ticket)).await {
        Ok(a) => json(a),
        Err(e) => json(crate::api::Answer {
            status: 500,
            body: format!(
                "{{\"error\":{}}}",
                crate::api::js(&format!("the answer failed: {e}"))
            )
            .into_bytes(),
        }),
    }
}

fn json(a: crate::api::Answer) -> Response<Body> {
    respond(a.status, "application/json", a.body)
}

fn forbidden() -> Response<Body> {
    respond(
        403,
        TEXT,
        b"403 forbidden: this URL lacks the access token kstate ui printed\n".to_vec(),
    )
}
