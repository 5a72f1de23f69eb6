//! `dsh web`: the browser front end of dsh.
//!
//! One HTTP server on loopback (by default `127.0.0.1:3080`) serves the UI's files, embedded in
//! the binary, and the Agent Client Protocol over WebSocket at `/acp`: the same methods,
//! notifications and permission requests as `dsh acp` on stdio, from the same bridge
//! (`dsh-acp`), so any ACP client library can drive dsh over the network as the page does.
//! Nothing else is an API (ruling R14): `/health` answers `ok`, everything else is a file.
//!
//! Every request needs the server's token (fresh per start, or fixed by the front end), its
//! `Host` must name the server and a WebSocket's `Origin` must be the page's own ([`guard`]).
//! The browsers' connections share one bridge through a hub, so several tabs can show one
//! session and a session keeps running when its tab closes.
//!
//! ```no_run
//! # async fn demo(ctx: dsh_kernel::Context) -> Result<(), dsh_web::WebError> {
//! let server = dsh_web::WebServer::bind(dsh_web::WebOptions::default()).await?;
//! println!("open {}", server.url());
//! server
//!     .serve(ctx, dsh_acp::AcpOptions::default(), std::future::pending())
//!     .await
//! # }
//! ```

mod address;
mod assets;
mod guard;
mod hub;
mod socket;
mod token;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use dsh_acp::AcpOptions;
use dsh_kernel::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use address::{DEFAULT_HOST, DEFAULT_PORT};
pub use token::{MIN_TOKEN_CHARS, Token};

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The address to listen on is not usable.
    #[error("{0}")]
    Address(String),
    /// Listening failed (the port is taken, the address is not this machine's).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// A token given by the person is not usable.
    #[error("DSH_WEB_TOKEN is not usable: {0}")]
    Token(String),
    /// The ACP bridge could not start or failed.
    #[error("the ACP bridge failed: {0}")]
    Bridge(String),
    /// The HTTP server failed.
    #[error("the web server failed: {0}")]
    Serve(std::io::Error),
}

/// How the server is started.
#[derive(Clone, Debug)]
pub struct WebOptions {
    /// The address to listen on, as the person gave it (an IP literal or a host name). Only
    /// an explicit choice should make it anything but loopback.
    pub host: String,
    /// The port; `0` lets the system choose one (tests, benchmarks).
    pub port: u16,
    /// The token every request must carry.
    pub token: Token,
    /// The directory the UI suggests for a new session (where `dsh web` was started), told
    /// to the page in the `initialize` answer's `_meta.dsh.cwd`.
    pub default_cwd: Option<std::path::PathBuf>,
}

impl Default for WebOptions {
    /// Loopback on the default port with a fresh token.
    fn default() -> Self {
        Self {
            host: DEFAULT_HOST.to_owned(),
            port: DEFAULT_PORT,
            token: Token::generate(),
            default_cwd: None,
        }
    }
}

/// A listening server, not yet serving: the front end prints its URL first.
pub struct WebServer {
    listener: TcpListener,
    local: SocketAddr,
    host: String,
    token: Token,
    default_cwd: Option<std::path::PathBuf>,
}

impl WebServer {
    /// Listens on the address `options` name.
    pub async fn bind(options: WebOptions) -> Result<WebServer, WebError> {
        let addr = address::resolve(&options.host, options.port).await?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| WebError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| WebError::Bind { addr, source })?;
        Ok(WebServer {
            listener,
            local,
            host: options.host,
            token: options.token,
            default_cwd: options.default_cwd,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Whether only this machine can reach it.
    pub fn is_loopback(&self) -> bool {
        self.local.ip().is_loopback()
    }

    /// The address to open, without the token.
    pub fn base_url(&self) -> String {
        format!(
            "http://{}:{}/",
            address::url_host(&self.host, self.local),
            self.local.port()
        )
    }

    /// The address to open in a browser: [`WebServer::base_url`] with `?token=`.
    pub fn url(&self) -> String {
        format!("{}?token={}", self.base_url(), self.token.expose())
    }

    /// Serves until `stop` resolves: the UI and ACP over WebSocket on one bridge over `ctx`
    /// (which must carry the core services, as for `dsh_acp::serve`), configured by `acp`.
    ///
    /// On `stop` the server stops accepting connections and the bridge stops its sessions as
    /// `dsh acp` does on a signal (each running turn cancelled, outstanding prompts answered
    /// `cancelled`, every session drained and saved); then the WebSockets are closed and this
    /// returns. The stop is not bounded here: a front end wraps the call in a timeout.
    pub async fn serve<S>(self, ctx: Context, acp: AcpOptions, stop: S) -> Result<(), WebError>
    where
        S: Future<Output = ()> + Send + 'static,
    {
        let stopping = CancellationToken::new();
        let trigger = stopping.clone();
        tokio::spawn(async move {
            stop.await;
            trigger.cancel();
        });
        let (hub, served) = hub::Hub::start(
            ctx,
            acp,
            self.default_cwd.clone(),
            stopping.clone().cancelled_owned(),
        )
        .await?;
        let access = Arc::new(guard::Access {
            hosts: address::AllowedHosts::new(&self.host, self.local),
            token: self.token,
            cookie: format!("dsh_web_{}", self.local.port()),
        });
        let files = Arc::new(assets::Assets::load());
        let app = Router::new()
            .route("/acp", get(socket::upgrade).with_state(hub))
            .route("/health", get(|| async { "ok\n" }))
            .fallback(move |request: Request| serve_file(files.clone(), request))
            .layer(axum::middleware::from_fn_with_state(access, guard::check));
        let http = axum::serve(self.listener, app)
            .with_graceful_shutdown(stopping.clone().cancelled_owned())
            .into_future();
        let http = tokio::spawn(http);
        // The bridge ends first (on stop, after its teardown): then the hub closes every
        // socket, and the HTTP server, which stopped accepting at the same moment, finishes.
        let bridge = served.await;
        stopping.cancel();
        let http = http.await;
        match bridge {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(WebError::Bridge(e.to_string())),
            Err(e) => return Err(WebError::Bridge(e.to_string())),
        }
        match http {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(WebError::Serve(e)),
            Err(e) => Err(WebError::Serve(std::io::Error::other(e))),
        }
    }
}

/// `GET`/`HEAD` of a file; any other method is refused.
async fn serve_file(files: Arc<assets::Assets>, request: Request) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return axum::http::StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    files.answer(request.uri().path(), request.headers())
}
