//! A real HTTP server on 127.0.0.1 for adapter tests (dcgm-exporter, IMDS,
//! EC2 pages): each request is answered by the test's handler on its own
//! thread, so a handler that stalls (a node that times out) holds up only
//! its own request. Stops when dropped.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What the handler saw: method, URL (path and query), headers, body.
pub struct Seen {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The answer: status, content type, body; `delay` first (a stalled server).
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: String,
    pub delay: Duration,
    /// More headers (a redirect's Location).
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn ok(content_type: &str, body: impl Into<String>) -> Reply {
        Reply { status: 200, content_type: content_type.to_string(), body: body.into(), delay: Duration::ZERO, headers: Vec::new() }
    }
    pub fn status(status: u16, body: impl Into<String>) -> Reply {
        Reply { status, content_type: "text/plain".to_string(), body: body.into(), delay: Duration::ZERO, headers: Vec::new() }
    }
    /// A 302 to `location`.
    pub fn redirect(location: &str) -> Reply {
        Reply { headers: vec![("Location".to_string(), location.to_string())], ..Reply::status(302, "") }
    }
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

pub struct Loopback {
    pub port: u16,
    running: Arc<AtomicBool>,
    server: Arc<tiny_http::Server>,
}

impl Loopback {
    pub fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Loopback {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1"));
        let port = server.server_addr().to_ip().expect("an IP address").port();
        let running = Arc::new(AtomicBool::new(true));
        let handler = Arc::new(handler);
        let (srv, run) = (server.clone(), running.clone());
        std::thread::spawn(move || {
            while run.load(Ordering::SeqCst) {
                let Ok(Some(mut request)) = srv.recv_timeout(Duration::from_millis(50)) else { continue };
                let handler = handler.clone();
                std::thread::spawn(move || {
                    let mut body = String::new();
                    let _ = std::io::Read::read_to_string(request.as_reader(), &mut body);
                    let seen = Seen {
                        method: request.method().to_string(),
                        url: request.url().to_string(),
                        headers: request.headers().iter().map(|h| (h.field.to_string(), h.value.to_string())).collect(),
                        body,
                    };
                    let reply = handler(&seen);
                    std::thread::sleep(reply.delay);
                    let header = tiny_http::Header::from_bytes("Content-Type", reply.content_type.as_bytes()).expect("a header");
                    let mut response = tiny_http::Response::from_string(reply.body).with_status_code(reply.status).with_header(header);
                    for (name, value) in &reply.headers {
                        response.add_header(tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a header"));
                    }
                    let _ = request.respond(response);
                });
            }
        });
        Loopback { port, running, server }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.running.store(false, Ordering::SeqCst);
        self.server.unblock();
    }
}
