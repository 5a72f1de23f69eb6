//! `dsh web`: the browser UI, served by `dsh-web` over the same composition as `dsh acp`.
//!
//! Prints the URL to open (with the token) on stdout and, on a desktop, opens it; logs go to
//! stderr or `DSH_LOG_FILE` and never carry the token. A signal stops it as it stops `dsh acp`:
//! every session cancelled, drained and saved (at most `dsh_harness::DRAIN`), then exit 130 or
//! 143.

use std::io::Write as _;
use std::path::PathBuf;

use dsh_harness::config::{Overrides, Settings, process_env};
use dsh_harness::{FrontEnd, Harness, HarnessOptions};
use dsh_web::{Token, WebOptions, WebServer};

use crate::acp::{bridge_options, serve_until_signal};
use crate::cli::WebArgs;
use crate::signals::Signals;

/// The variable that fixes the token, so a script knows it in advance.
pub const TOKEN_ENV: &str = "DSH_WEB_TOKEN";

/// Serves the web UI until a signal stops it; returns the exit status.
pub fn main(settings: Settings, flags: Overrides, cwd: Option<PathBuf>, args: &WebArgs) -> i32 {
    // Read from dsh's private copy: the variable looks like a secret, so it was moved out of
    // the environment at start-up and no command dsh runs can see it.
    let token = match process_env(TOKEN_ENV) {
        Some(value) => match Token::given(&value) {
            Ok(token) => token,
            Err(e) => {
                eprintln!("dsh: {e}");
                return 2;
            }
        },
        None => Token::generate(),
    };
    if let Err(e) = settings.check_credentials(&process_env) {
        eprintln!("dsh: {:#}", anyhow::Error::new(e));
        return 1;
    }
    let default_cwd = match cwd.map_or_else(std::env::current_dir, Ok) {
        Ok(dir) => Some(dir),
        Err(e) => {
            eprintln!("dsh: cannot read the current directory: {e}");
            None
        }
    };
    crate::serve(|mut signals: Signals| async move {
        let guard_policy = settings.guard.approval_or(dsh_guard::ApprovalPolicy::Ask);
        let options = HarnessOptions::new(FrontEnd::Editor).with_flags(flags);
        let harness = match Harness::start(settings, options).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("dsh: {:#}", anyhow::Error::new(e));
                return 1;
            }
        };
        if let Err(e) = harness.ready().await {
            eprintln!("dsh: {e}");
            harness.shutdown().await;
            return 1;
        }
        let web = WebOptions {
            host: args.host.clone(),
            port: args.port,
            token,
            default_cwd,
        };
        let server = match WebServer::bind(web).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("dsh: {e}");
                harness.shutdown().await;
                return 1;
            }
        };
        if !server.is_loopback() {
            eprintln!(
                "dsh: warning: serving on {}, beyond this machine: anyone who can reach it and \
                 has the token controls dsh, over plain HTTP. An SSH tunnel to a loopback \
                 `dsh web` is safer (see README).",
                server.local_addr()
            );
        }
        announce(&server);
        // Kept until dsh exits: the browser reads it some time after it was asked to.
        let _opener = (!args.no_open).then(|| open_browser(&server)).flatten();
        let options = bridge_options(&harness, guard_policy != dsh_guard::ApprovalPolicy::Ask);
        let context = harness.context().clone();
        let served = |stop| server.serve(context, options, stop);
        let (code, deadline) = serve_until_signal(&mut signals, served).await;
        harness.shutdown_by(deadline).await;
        code
    })
}

/// Prints where to open the UI. Stdout, not the log: the token is for the person.
fn announce(server: &WebServer) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "dsh web: {}", server.url());
    let _ = out.flush();
}

/// Opens the URL in the desktop's browser, through a private file that redirects to it: a URL
/// on a command line is readable by every user of the machine (`ps`), a file of mode 0600 is
/// not. Only on a desktop: on a bare terminal `xdg-open` could start a text browser in it.
fn open_browser(server: &WebServer) -> Option<tempfile::NamedTempFile> {
    let desktop = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    if !desktop {
        return None;
    }
    let mut page = tempfile::Builder::new()
        .prefix("dsh-web-")
        .suffix(".html")
        .tempfile()
        .ok()?;
    let url = server.url();
    let html = format!(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={url}\">\
         <title>dsh</title><a href=\"{url}\">Open dsh</a>\n"
    );
    page.write_all(html.as_bytes()).ok()?;
    page.flush().ok()?;
    let spawned = std::process::Command::new("xdg-open")
        .arg(page.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped on a thread of its own; nothing waits for the browser.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => tracing::debug!(error = %e, "cannot start xdg-open; open the URL by hand"),
    }
    Some(page)
}
