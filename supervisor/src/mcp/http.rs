//! `clawpool mcp --listen ADDR`: the same server over MCP's Streamable HTTP (`docs/mcp.md`,
//! "Over HTTP"), on a loopback address or a Unix socket. This module owns the listener and the
//! gate every request passes before rmcp's service sees it:
//!
//! 1. **Origin**: a request carrying a browser `Origin` that is not loopback is refused (403), so
//!    a web page the person visits cannot drive the pool; rmcp's own `Host` check (loopback
//!    names only) answers DNS rebinding.
//! 2. **Bearer token**: `Authorization: Bearer TOKEN` must be one of the token file's
//!    ([`super::tokens`]); otherwise 401. Its tier rides in the request's extensions as a
//!    [`Grant`], which every tool reads (`server.rs`): the tier is the token's, per request.
//! 3. On a Unix socket, a peer process inside a lane (`clawpool_lane::caller`) is refused
//!    (403) whatever its token: a lane never drives the pool.
//!
//! The address must be loopback: the server is for the person's own machine, and a token on a
//! plain-HTTP network connection could be read off the wire.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use clawpool_lane::caller::{Caller, ProcFs};
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};

use super::pool_api::PoolApi;
use super::server::{Access, PoolServer};
use super::tokens::{Grant, Tokens};

/// The one path the server answers on.
pub const ENDPOINT: &str = "/mcp";

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Listen {
    /// `127.0.0.1:PORT`, `[::1]:PORT`, `localhost:PORT`, or a path (with a `/`) for a Unix
    /// socket. Anything not loopback is refused.
    pub fn parse(addr: &str) -> Result<Self, String> {
        if addr.contains('/') {
            return Ok(Listen::Unix(PathBuf::from(addr)));
        }
        let socket: SocketAddr = match addr.strip_prefix("localhost:") {
            Some(port) => format!("127.0.0.1:{port}").parse(),
            None => addr.parse(),
        }
        .map_err(|_| {
            format!("--listen {addr:?}: give 127.0.0.1:PORT, [::1]:PORT or a Unix socket's path")
        })?;
        if !socket.ip().is_loopback() {
            return Err(format!(
                "--listen {addr:?} is not a loopback address: clawpool mcp listens on 127.0.0.1, ::1 or a Unix socket only"
            ));
        }
        Ok(Listen::Tcp(socket))
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// A refusal as the CLI's JSON error.
fn refusal(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    let body = json!({"error": {"kind": kind, "message": message}}).to_string();
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"clawpool\""),
        );
    }
    response
}

/// Whether an `Origin` value names this machine: `http(s)://localhost|127.0.0.1|[::1][:port]`.
fn loopback_origin(origin: &str) -> bool {
    let Ok(uri) = http::Uri::try_from(origin.trim()) else {
        return false;
    };
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    scheme_ok
        && (host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()))
}

/// The gate (see the module's doc), then rmcp's service.
struct Gate {
    tokens: Tokens,
    service: StreamableHttpService<PoolServer, LocalSessionManager>,
}

impl Gate {
    async fn handle(
        &self,
        mut request: Request<Incoming>,
        peer_pid: Option<u32>,
    ) -> Response<Body> {
        if request.uri().path() != ENDPOINT {
            return refusal(
                StatusCode::NOT_FOUND,
                "not_found",
                "clawpool mcp answers on /mcp",
            );
        }
        if let Some(origin) = request.headers().get(header::ORIGIN)
            && !origin.to_str().is_ok_and(loopback_origin)
        {
            return refusal(
                StatusCode::FORBIDDEN,
                "origin_refused",
                "a request from a web page not on this machine (its Origin) is refused",
            );
        }
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(entry) = presented.and_then(|token| self.tokens.check(token)) else {
            return refusal(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a bearer token from `clawpool mcp token` is needed (Authorization: Bearer TOKEN)",
            );
        };
        if let Some(pid) = peer_pid {
            // SAFETY: getuid has no preconditions and cannot fail.
            let uid = unsafe { libc::getuid() };
            if let Err(refused) = Caller::identify(pid, uid, &ProcFs).check_operator() {
                return refusal(StatusCode::FORBIDDEN, "caller_refused", &refused.reason);
            }
        }
        request.extensions_mut().insert(Grant {
            tier: entry.tier,
            token: entry.id,
            peer_pid,
        });
        let mut service = self.service.clone();
        match tower_service::Service::call(&mut service, request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// Serves one connection.
fn serve_connection<IO>(gate: Arc<Gate>, io: IO, peer_pid: Option<u32>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let service = hyper::service::service_fn(move |request| {
            let gate = gate.clone();
            async move { Ok::<_, Infallible>(gate.handle(request, peer_pid).await) }
        });
        // A connection that breaks off is that client's business, not the server's.
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(io), service)
            .await;
    });
}

/// Listens at `listen` until SIGINT or SIGTERM; `on_ready` is told the address bound (the port
/// chosen for `:0`) once connections are accepted.
pub async fn serve(
    api: PoolApi,
    listen: &Listen,
    on_ready: impl FnOnce(String),
) -> std::io::Result<()> {
    let tokens = Tokens::in_dir(api.state_dir().root());
    let service = StreamableHttpService::new(
        move || Ok(PoolServer::new(api.clone(), Access::Tokens)),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let gate = Arc::new(Gate { tokens, service });
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    match listen {
        Listen::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            on_ready(format!("http://{}{ENDPOINT}", listener.local_addr()?));
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let (stream, _) = accepted?;
                        serve_connection(gate.clone(), stream, None);
                    }
                    _ = interrupt.recv() => return Ok(()),
                    _ = terminate.recv() => return Ok(()),
                }
            }
        }
        Listen::Unix(path) => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{} is in use by a server", path.display()),
                ));
            }
            // A socket left by a server that is gone; anything else at the path stays.
            if std::fs::symlink_metadata(path)
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
            {
                std::fs::remove_file(path)?;
            }
            let listener = tokio::net::UnixListener::bind(path)?;
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
            on_ready(path.display().to_string());
            let outcome = loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let (stream, _) = match accepted {
                            Ok(accepted) => accepted,
                            Err(e) => break Err(e),
                        };
                        let pid = stream.peer_cred().ok().and_then(|c| c.pid()).and_then(|p| u32::try_from(p).ok());
                        // No peer known: no way to tell a lane from a person, so no service.
                        if pid.is_none() {
                            continue;
                        }
                        serve_connection(gate.clone(), stream, pid);
                    }
                    _ = interrupt.recv() => break Ok(()),
                    _ = terminate.recv() => break Ok(()),
                }
            };
            let _ = std::fs::remove_file(path);
            outcome
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_and_socket_paths_are_taken() {
        assert_eq!(
            Listen::parse("127.0.0.1:0"),
            Ok(Listen::Tcp("127.0.0.1:0".parse().expect("addr")))
        );
        assert_eq!(
            Listen::parse("localhost:8080"),
            Ok(Listen::Tcp("127.0.0.1:8080".parse().expect("addr")))
        );
        assert!(matches!(Listen::parse("[::1]:9"), Ok(Listen::Tcp(_))));
        assert!(matches!(Listen::parse("./mcp.sock"), Ok(Listen::Unix(_))));
        for refused in [
            "0.0.0.0:80",
            "192.168.1.2:80",
            "[::]:80",
            "example.com:80",
            "80",
        ] {
            assert!(Listen::parse(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn loopback_origins_are_this_machine_and_no_other() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
        ] {
            assert!(loopback_origin(ok), "{ok}");
        }
        for refused in [
            "https://evil.example",
            "http://localhost.evil.example",
            "null",
            "file://",
            "http://10.0.0.1",
        ] {
            assert!(!loopback_origin(refused), "{refused}");
        }
    }
}
