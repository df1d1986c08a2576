//! `/metrics` over HTTP: a small server on its own thread that renders the
//! newest snapshot the engine handed it, in the format the scraper asks for
//! (OpenMetrics when its `Accept` names it, else Prometheus's text format).
//!
//! Loopback unless told otherwise (`--metrics ADDR`); GET only; nothing but
//! `/metrics` (and a line at `/` saying where they are). A scrape never
//! waits on the engine: it reads the last snapshot under a short lock.
//!
//! Owns the socket and its thread; the figures are `metrics`'s.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Snapshot;

/// Where `--metrics` with no address listens.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// The running exporter; stops when dropped.
pub struct Exporter {
    latest: Arc<Mutex<Option<Snapshot>>>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Listens on `addr` ("host:port").
    pub fn start(addr: &str) -> Result<Exporter, String> {
        let server = tiny_http::Server::http(addr).map_err(|e| format!("--metrics {addr}: {e}"))?;
        let addr = server.server_addr().to_ip().ok_or_else(|| format!("--metrics {addr}: not an IP address"))?;
        let server = Arc::new(server);
        let latest: Arc<Mutex<Option<Snapshot>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, l, flag) = (server.clone(), latest.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("gpuroom-metrics".into()).spawn(move || serve(&s, &l, &flag)).map_err(|e| e.to_string())?;
        Ok(Exporter { latest, addr, stop, server, thread: Some(thread) })
    }

    /// Where it listens (the port chosen, for `:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The figures the next scrape renders.
    pub fn update(&self, snapshot: Snapshot) {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(snapshot);
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(server: &tiny_http::Server, latest: &Mutex<Option<Snapshot>>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(Some(request)) = server.recv_timeout(Duration::from_millis(200)) else { continue };
        let path = request.url().split('?').next().unwrap_or("").to_string();
        let response = match (request.method(), path.as_str()) {
            (tiny_http::Method::Get, "/metrics") => {
                let open = request.headers().iter().any(|h| h.field.equiv("Accept") && h.value.as_str().contains("application/openmetrics-text"));
                let snapshot = latest.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match snapshot {
                    Some(snapshot) => {
                        let now = chrono::Utc::now().timestamp_millis();
                        let (body, kind) = if open {
                            (super::render_openmetrics(&snapshot, now), "application/openmetrics-text; version=1.0.0; charset=utf-8")
                        } else {
                            (super::render_text(&snapshot, now), prometheus_client::encoding::prometheus_text::CONTENT_TYPE)
                        };
                        reply(200, kind, body)
                    }
                    None => reply(503, "text/plain; charset=utf-8", "gpuroom: the engine has published nothing yet\n".into()),
                }
            }
            (tiny_http::Method::Get, "/") => reply(200, "text/plain; charset=utf-8", "gpuroom: metrics at /metrics\n".into()),
            (tiny_http::Method::Get, _) => reply(404, "text/plain; charset=utf-8", "not found: gpuroom serves /metrics\n".into()),
            _ => reply(405, "text/plain; charset=utf-8", "GET only\n".into()),
        };
        let _ = request.respond(response);
    }
}

fn reply(status: u16, kind: &str, body: String) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let response = tiny_http::Response::from_string(body).with_status_code(status);
    match tiny_http::Header::from_bytes(&b"Content-Type"[..], kind.as_bytes()) {
        Ok(header) => response.with_header(header),
        Err(()) => response,
    }
}
