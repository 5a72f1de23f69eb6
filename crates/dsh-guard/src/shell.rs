//! The guard's side of dsh-shell's supervision seam: every command (and every stdio MCP
//! server) starts under a supervisor forked by the guard's zygote, with the session's sandbox
//! policy, or is refused.

use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Once, OnceLock};

use dsh_session::SessionId;
use dsh_shell::{JobIo, JobKind, JobRequest, ShellError, SuperviseRequest, Supervision, Zygote};

use crate::landlock::{KernelProbe, LandlockProbe, gaps};
use crate::mode::SandboxMode;
use crate::namespace::Namespaces;
use crate::policy::{Protect, SandboxPolicy};
use crate::proxy::{CALL_ID_VARIABLE, NetworkProxy, ProxyOwner, with_proxy_env};
use crate::session_policy::SessionPolicies;
use crate::supervisor::SUPERVISE_ARG;
use crate::zygote::{Hello, ZYGOTE_ARG};

/// The error code of a command refused because its confining mode cannot be enforced.
pub const SANDBOX_UNAVAILABLE: &str = "SANDBOX_UNAVAILABLE";

/// Which executable acts as the supervisor, and the arguments that select supervisor mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorProgram {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the policy (`__supervise` for dsh itself).
    pub args: Vec<OsString>,
}

impl SupervisorProgram {
    /// The running `dsh` binary, re-executed through `/proc/self/exe` (which stays valid even
    /// if the file on disk is replaced while dsh runs) with [`SUPERVISE_ARG`].
    pub fn this_executable() -> Self {
        Self {
            program: PathBuf::from("/proc/self/exe"),
            args: vec![SUPERVISE_ARG.into()],
        }
    }

    /// A zygote of this program, not started yet.
    pub fn zygote(&self) -> Zygote {
        let mut args = self.args.clone();
        args.push(ZYGOTE_ARG.into());
        Zygote::new(self.program.clone(), args)
    }
}

/// What the sandbox enforces on this machine, as found out when the first command starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    /// The namespaces commands get (none: Landlock and seccomp alone).
    pub namespaces: Namespaces,
    /// Why there are none (or only some), when so.
    pub namespace_reason: String,
    /// The kernel's Landlock ABI.
    pub abi: u32,
    /// What is not enforced in this configuration, one phrase each.
    pub gaps: Vec<String>,
}

/// Starts each command under a supervisor forked by one zygote with `policy` (narrowed per
/// session by [`SessionPolicies`] when given them: plan mode's read-only); refuses every
/// confined command with `SANDBOX_UNAVAILABLE` when the probe says Landlock cannot be used,
/// or when what the policy requires cannot be had here.
#[derive(Debug)]
pub struct GuardSupervision {
    policy: SandboxPolicy,
    zygote: Zygote,
    probe: Arc<dyn LandlockProbe>,
    hello: OnceLock<Result<Hello, String>>,
    said: Once,
    policies: Option<Arc<SessionPolicies>>,
    proxy: Option<Arc<dyn NetworkProxy>>,
}

impl GuardSupervision {
    /// Supervision under `policy`, probing the running kernel.
    pub fn new(policy: SandboxPolicy, program: SupervisorProgram) -> Self {
        Self::with_probe(policy, program, Arc::new(KernelProbe::default()))
    }

    /// Supervision with a chosen probe (tests simulate a kernel without Landlock with it).
    pub fn with_probe(
        policy: SandboxPolicy,
        program: SupervisorProgram,
        probe: Arc<dyn LandlockProbe>,
    ) -> Self {
        Self {
            policy,
            zygote: program.zygote(),
            probe,
            hello: OnceLock::new(),
            said: Once::new(),
            policies: None,
            proxy: None,
        }
    }

    /// The same supervision with the network by allow-list: confined commands may connect
    /// over TCP only to `proxy` (started with the first of them), and their proxy variables
    /// point at it. Commands that run unconfined (an approved escalation,
    /// `danger-full-access`) are not sent through it.
    #[must_use]
    pub fn with_network_proxy(mut self, proxy: Arc<dyn NetworkProxy>) -> Self {
        self.proxy = Some(proxy);
        self
    }

    /// The same supervision, confining each session's commands with the narrowing `policies`
    /// hold for it (plan mode's read-only), which from now on say that they reach commands.
    #[must_use]
    pub fn with_session_policies(mut self, policies: Arc<SessionPolicies>) -> Self {
        policies.mark_commands_narrowed();
        self.policies = Some(policies);
        self
    }

    /// The policy every command runs under (before any session's narrowing).
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The zygote's process id, once it runs (benchmarks read its CPU counters).
    pub fn zygote_pid(&self) -> Option<u32> {
        self.zygote.pid()
    }

    /// What the sandbox enforces here (starts the zygote if it does not run yet).
    pub fn enforcement(&self) -> Result<Enforcement, String> {
        let hello = self.hello()?;
        Ok(self.enforcement_with(&self.policy, hello))
    }

    fn hello(&self) -> Result<&Hello, String> {
        self.hello
            .get_or_init(|| {
                let line = self.zygote.hello().map_err(|e| e.to_string())?;
                Hello::decode(&line).ok_or_else(|| format!("unexpected zygote hello {line:?}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn enforcement_with(&self, policy: &SandboxPolicy, hello: &Hello) -> Enforcement {
        let namespaces = if policy.namespaces {
            hello.namespaces
        } else {
            Namespaces::None
        };
        let namespace_reason = if policy.namespaces {
            hello.reason.clone()
        } else {
            "turned off (`[sandbox] namespaces = false`)".to_owned()
        };
        let with_ns = namespaces != Namespaces::None;
        let mut found: Vec<String> = gaps(hello.abi, with_ns, policy.network)
            .into_iter()
            .map(str::to_owned)
            .collect();
        if !with_ns {
            found.push(format!(
                "no mount or PID namespace ({namespace_reason}): chmod, chown, setxattr and \
                 utimes of existing files outside the writable roots are not refused, .git and \
                 .dsh stay writable, and other processes' /proc files (their environment) are \
                 readable"
            ));
        }
        Enforcement {
            namespaces,
            namespace_reason,
            abi: hello.abi,
            gaps: found,
        }
    }

    /// Decides how a confined job of `policy` runs here, or refuses it.
    fn plan(&self, policy: &SandboxPolicy) -> Result<Namespaces, ShellError> {
        let refuse = |cause: String| ShellError::Refused {
            code: SANDBOX_UNAVAILABLE,
            message: format!(
                "{SANDBOX_UNAVAILABLE}: the sandbox mode `{}` cannot be enforced here ({cause}), \
                 so the command was not run. Rerun dsh with `--sandbox danger-full-access` to \
                 run commands without the sandbox.",
                policy.mode
            ),
        };
        self.probe.probe().map_err(|e| {
            refuse(format!(
                "{}; enable Landlock: kernel 5.13+, `lsm=...,landlock`",
                e.cause
            ))
        })?;
        let hello = self
            .hello()
            .map_err(|e| refuse(format!("the supervisor did not start: {e}")))?;
        if policy.proxy_port.is_some() && hello.abi < 4 {
            return Err(refuse(format!(
                "`[sandbox] network = \"allowlist\"` needs Landlock's TCP rules (ABI 4, kernel \
                 6.7+) to keep commands from going around the proxy, and this kernel's ABI is {}",
                hello.abi
            )));
        }
        if let Some(min) = policy.min_abi
            && hello.abi < min
        {
            return Err(refuse(format!(
                "the kernel's Landlock ABI is {}, below `[sandbox] min_abi = {min}`",
                hello.abi
            )));
        }
        let enforcement = self.enforcement_with(policy, hello);
        if enforcement.namespaces == Namespaces::None {
            if let Some(home) = policy.dsh_home_in_roots() {
                return Err(refuse(format!(
                    "dsh's home {} is inside a writable root and no mount namespace can keep it \
                     read-only ({}); move DSH_HOME out of the workspace and writable roots",
                    home.display(),
                    enforcement.namespace_reason
                )));
            }
            if policy.protect == Protect::Require {
                return Err(refuse(format!(
                    "`[sandbox] protect = \"require\"` needs a mount namespace to keep .git and \
                     .dsh read-only, and none can be had ({})",
                    enforcement.namespace_reason
                )));
            }
        }
        self.said.call_once(|| {
            if !enforcement.gaps.is_empty() {
                tracing::warn!(
                    "the sandbox is partial on this machine (Landlock ABI {}): {}",
                    enforcement.abi,
                    enforcement.gaps.join("; ")
                );
            }
        });
        Ok(enforcement.namespaces)
    }
}

impl Supervision for GuardSupervision {
    fn start(&self, request: &SuperviseRequest<'_>, io: JobIo) -> Result<UnixStream, ShellError> {
        let mut policy = self.policy.for_workspace(request.workspace);
        if request.untrusted && policy.mode == SandboxMode::DangerFullAccess {
            // Untrusted code never runs unconfined, whatever the session's mode (R15).
            policy.mode = SandboxMode::WorkspaceWrite;
        }
        let narrowed = request
            .session
            .zip(self.policies.as_ref())
            .and_then(|(session, policies)| policies.sandbox(&SessionId::new(session)));
        if let Some(mode) = narrowed {
            policy.mode = policy.mode.narrowed_to(mode);
        }
        // Neither untrusted code nor a narrowed session's command (plan mode: what the person
        // asked for, failing closed) runs unconfined, escalation or not.
        let unconfined = request.unconfined && !request.untrusted && narrowed.is_none();
        let confined = policy.mode.confines() && !unconfined;
        let mut env = request.env.to_vec();
        if let Some(proxy) = self.proxy.as_ref().filter(|_| confined && policy.network) {
            // The bash tool names its call in the environment (a trusted field the model
            // cannot set); hooks and MCP servers run for no call.
            let call = request
                .env
                .iter()
                .find(|(name, _)| name == CALL_ID_VARIABLE)
                .and_then(|(_, value)| value.to_str());
            let owner = ProxyOwner {
                session: request.session,
                call,
            };
            let endpoint = proxy.enlist(owner).map_err(|cause| ShellError::Refused {
                code: SANDBOX_UNAVAILABLE,
                message: format!(
                    "{SANDBOX_UNAVAILABLE}: {cause}, and without it commands have no network \
                     under `[sandbox] network = \"allowlist\"`, so the command was not run."
                ),
            })?;
            policy.proxy_port = Some(endpoint.port);
            env = with_proxy_env(&env, &endpoint.url);
        }
        let namespaces = if confined {
            self.plan(&policy)?
        } else {
            Namespaces::None
        };
        let program = matches!(request.job, JobKind::Program(_));
        let mut args = policy.supervisor_args(unconfined, namespaces, program);
        match request.job {
            JobKind::Bash(script) => args.push(script.into()),
            JobKind::Program(argv) => args.extend(argv.iter().cloned()),
        }
        let job = JobRequest {
            args,
            cwd: request.workdir.to_path_buf(),
            env,
        };
        self.zygote
            .start(&job, io)
            .map_err(|source| ShellError::Spawn {
                what: "the command supervisor",
                source,
            })
    }
}
