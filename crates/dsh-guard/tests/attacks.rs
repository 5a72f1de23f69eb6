//! The escapes an outside attack on the sandbox found (issue 29), each reproduced by a real
//! command under the guard's supervisor and shown to fail: as root (CI's user) and as
//! `nobody` (through `setpriv`), with namespaces and, where the finding applies there too,
//! with Landlock alone (a kernel or container without namespaces). Each test also shows the
//! attack succeeding where nothing stops it (danger-full-access, or the documented gap), so a
//! test that could not see the attack cannot pass.
//!
//! The attacks are small Perl programs: Perl is part of every Debian-like base system and can
//! make raw `ioctl`, `socket` and `syscall` calls without modules beyond its core.

#![allow(clippy::unwrap_used)]

#[path = "../../dsh-shell/tests/common/mod.rs"]
mod common;
mod guarded;

use std::os::fd::AsFd;

use dsh_guard::{SANDBOX_UNAVAILABLE, SandboxMode, SandboxPolicy};
use dsh_shell::{ShellError, ShellExecRequest, ShellExecutor};
use dsh_testkit::Tag;
use guarded::{Dirs, User, denied, guarded, guarded_as, q, run};

/// Becomes the session leader's controlling terminal by opening a fresh pty (no
/// `O_NOCTTY`), then pushes a character into it: the keystroke injection of the attack,
/// without touching the terminal the tests run in. Also reports whether the command leads
/// its own session and whether `/dev/tty` opens. (Closing the pty's master hangs up the
/// session at exit: SIGHUP is ignored so the output survives.)
const INJECT: &str = r#"exec perl -e '
use Fcntl; $| = 1; $SIG{HUP} = "IGNORE";
open(my $st, "<", "/proc/self/stat"); my @stat = split / /, <$st>;
print $stat[5] == $$ ? "leader\n" : "not a leader\n";
if (sysopen(my $t, "/dev/tty", O_RDONLY)) { print "tty opened\n" } else { print "tty: $!\n" }
sysopen(my $m, "/dev/ptmx", O_RDWR|O_NOCTTY) or die "ptmx: $!";
my $unlock = pack("i", 0); ioctl($m, 0x40045431, $unlock) or die "unlock: $!";
my $n = pack("i", 0); ioctl($m, 0x80045430, $n) or die "ptn: $!"; $n = unpack("i", $n);
sysopen(my $s, "/dev/pts/$n", O_RDWR) or die "pts: $!";
my $key = "x"; my $sub = pack("c", 0);
print ioctl($s, 0x5412, $key) ? "TIOCSTI injected\n" : "TIOCSTI: $!\n";
print ioctl($s, 0x541C, $sub) ? "TIOCLINUX ok\n" : "TIOCLINUX: $!\n";
'"#;

fn policies(dirs: &Dirs, mode: SandboxMode) -> Vec<SandboxPolicy> {
    [true, false]
        .map(|namespaces| {
            let mut policy = dirs.policy(mode);
            policy.namespaces = namespaces;
            policy
        })
        .to_vec()
}

#[tokio::test]
async fn commands_have_no_controlling_terminal_and_cannot_push_keystrokes() {
    let dirs = Dirs::new();
    for user in User::all() {
        for policy in policies(&dirs, SandboxMode::WorkspaceWrite) {
            let what = format!("{user:?}, namespaces {}", policy.namespaces);
            let exec = guarded_as(policy, user);
            let out = run(&exec, INJECT).await;
            let text = format!(
                "{}{}exit {:?} signal {:?}",
                out.stdout.text, out.stderr.text, out.exit_code, out.signal
            );
            assert!(text.contains("leader\n"), "{what}: {text}");
            assert!(
                text.contains("tty: No such device or address"),
                "{what}: {text}"
            );
            assert!(
                text.contains("TIOCSTI: Operation not permitted"),
                "{what}: {text}"
            );
            assert!(
                text.contains("TIOCLINUX: Operation not permitted"),
                "{what}: {text}"
            );
            exec.dispose().await;
        }
    }
    // Unconfined, the same program does type into its terminal: the test sees the attack.
    let exec = guarded(dirs.policy(SandboxMode::DangerFullAccess));
    let out = run(&exec, INJECT).await;
    assert!(
        out.stdout.text.contains("leader\n") && out.stdout.text.contains("TIOCSTI injected"),
        "{}{}",
        out.stdout.text,
        out.stderr.text
    );
    exec.dispose().await;
}

/// Opens a socket of each family (MPTCP among them) and an io_uring, one line each.
const SOCKETS: &str = r#"perl -e '
for my $t (["mptcp",2,1,262],["udp",2,2,0],["tcp6",10,1,0],["packet",17,2,0],
           ["netlink",16,3,0],["vsock",40,1,0],["unix",1,1,0]) {
  my ($name, $domain, $type, $proto) = @$t;
  print socket(my $s, $domain, $type, $proto) ? "$name ok\n" : "$name: $!\n";
}
print socketpair(my $a, my $b, 2, 1, 0) ? "inet pair ok\n" : "inet pair: $!\n";
my $params = "\0" x 120;
print syscall(425, 8, $params) >= 0 ? "io_uring ok\n" : "io_uring: $!\n";
'"#;

#[tokio::test]
async fn without_the_network_only_unix_sockets_open() {
    let dirs = Dirs::new();
    for user in User::all() {
        for mut policy in policies(&dirs, SandboxMode::WorkspaceWrite) {
            policy.network = false;
            let what = format!("{user:?}, namespaces {}", policy.namespaces);
            let exec = guarded_as(policy, user);
            let text = run(&exec, SOCKETS).await.stdout.text;
            for family in [
                "mptcp",
                "udp",
                "tcp6",
                "packet",
                "netlink",
                "vsock",
                "inet pair",
                "io_uring",
            ] {
                assert!(
                    text.contains(&format!("{family}: Operation not permitted")),
                    "{what}: {family}: {text}"
                );
            }
            assert!(text.contains("unix ok"), "{what}: {text}");
            exec.dispose().await;
        }
    }
    // With the network on, IP sockets open; vsock and io_uring stay refused.
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let text = run(&exec, SOCKETS).await.stdout.text;
    assert!(
        text.contains("udp ok") && text.contains("unix ok"),
        "{text}"
    );
    assert!(text.contains("vsock: Operation not permitted"), "{text}");
    assert!(text.contains("io_uring: Operation not permitted"), "{text}");
    exec.dispose().await;
}

#[tokio::test]
async fn a_confined_command_holds_no_capability_and_cannot_touch_other_processes() {
    let dsh = std::process::id();
    let dirs = Dirs::new();
    let victim = dirs.out("owned-by-root");
    std::fs::write(&victim, "x").unwrap();
    let script = format!(
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; \
         hostname dsh-attack 2>&1 || echo hostname refused; \
         chown 65534 {victim} 2>&1 || echo chown refused; \
         perl -e 'my $l = pack(\"QQ\", 0, 0); \
                  print syscall(302, {dsh}, 4, $l, 0) == 0 ? \"prlimit ok\\n\" : \"prlimit: $!\\n\"; \
                  print setpriority(0, {dsh}, 1) ? \"renice ok\\n\" : \"renice: $!\\n\"'",
        victim = q(&victim)
    );
    for policy in policies(&dirs, SandboxMode::WorkspaceWrite) {
        let what = format!("namespaces {}", policy.namespaces);
        let exec = guarded(policy);
        let out = run(&exec, &script).await;
        let text = &out.stdout.text;
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert!(
                text.contains(&format!("{set}:\t0000000000000000")),
                "{what}: {set}: {text}"
            );
        }
        assert!(text.contains("hostname refused"), "{what}: {text}");
        assert!(text.contains("chown refused"), "{what}: {text}");
        // dsh is out of sight in a PID namespace, refused by seccomp without one.
        for call in ["prlimit", "renice"] {
            assert!(
                text.contains(&format!("{call}: No such process"))
                    || text.contains(&format!("{call}: Operation not permitted")),
                "{what}: {call}: {text}"
            );
        }
        exec.dispose().await;
    }
    // With namespaces, the owner's own chmod of a file outside the roots fails too.
    let exec = guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let out = run(&exec, &format!("chmod 600 {}", q(&victim))).await;
    assert!(
        out.stderr.text.contains("Read-only file system"),
        "{}",
        out.stderr.text
    );
    exec.dispose().await;
}

#[tokio::test]
async fn other_processes_environments_are_out_of_sight_in_a_pid_namespace() {
    let tag = Tag::new();
    let marker = format!("DSH_ATTACK_MARKER={tag}");
    let mut victim = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec {}", tag.sleep(120)))
        .env("DSH_ATTACK_MARKER", tag.to_string())
        .spawn()
        .unwrap();
    tag.wait_running(1, "the victim");
    let probe = format!(
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^{marker}$'; true"
    );
    let dirs = Dirs::new();
    for user in User::all() {
        let exec = guarded_as(dirs.policy(SandboxMode::WorkspaceWrite), user);
        let out = run(&exec, &probe).await;
        assert_eq!(out.stdout.text.trim(), "0", "{user:?}: {}", out.stderr.text);
        exec.dispose().await;
    }
    // Without a PID namespace Landlock's ptrace rule refuses the read; unconfined, the same
    // probe finds the marker.
    let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
    policy.namespaces = false;
    let exec = guarded(policy);
    assert_eq!(run(&exec, &probe).await.stdout.text.trim(), "0");
    exec.dispose().await;
    let exec = guarded(dirs.policy(SandboxMode::DangerFullAccess));
    assert_eq!(run(&exec, &probe).await.stdout.text.trim(), "1");
    exec.dispose().await;
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[tokio::test]
async fn git_dsh_and_dsh_home_stay_read_only_inside_the_workspace() {
    let dirs = Dirs::new();
    for dir in [".git/hooks", ".dsh", "home"] {
        std::fs::create_dir_all(dirs.ws(dir)).unwrap();
    }
    std::fs::write(dirs.ws(".git/config"), "[core]\n").unwrap();
    std::fs::write(dirs.ws("home/config.toml"), "").unwrap();
    // Writable by nobody too: only the sandbox may stand in the way.
    for path in [
        ".git",
        ".git/hooks",
        ".dsh",
        "home",
        ".git/config",
        "home/config.toml",
    ] {
        std::fs::set_permissions(
            dirs.ws(path),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
    }
    let attack = "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config; \
         echo 'touch /tmp/pwned' > .git/hooks/pre-commit; \
         echo '{}' > .dsh/hooks.json; \
         echo 'mode = \"danger-full-access\"' >> home/config.toml; \
         mv .git .git-old; \
         echo fine > ok-$(id -u).txt";
    for user in User::all() {
        let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
        policy.dsh_home = Some(dirs.ws("home"));
        let exec = guarded_as(policy, user);
        let out = run(&exec, attack).await;
        let err = &out.stderr.text;
        assert_eq!(
            err.matches("Read-only file system").count(),
            4,
            "{user:?}: {err}"
        );
        assert!(err.contains("mv: cannot move"), "{user:?}: {err}");
        assert_eq!(
            std::fs::read_to_string(dirs.ws(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!dirs.ws(".git/hooks/pre-commit").exists());
        assert!(!dirs.ws(".dsh/hooks.json").exists());
        assert_eq!(
            std::fs::read_to_string(dirs.ws("home/config.toml")).unwrap(),
            ""
        );
        let uid = if user == User::Me {
            nix::unistd::geteuid().as_raw()
        } else {
            65534
        };
        let ok = dirs.ws(&format!("ok-{uid}.txt"));
        assert_eq!(std::fs::read_to_string(ok).unwrap(), "fine\n", "{user:?}");
        exec.dispose().await;
    }
}

#[tokio::test]
async fn without_namespaces_a_dsh_home_in_the_workspace_or_protect_require_refuses() {
    let dirs = Dirs::new();
    let marker = dirs.ws("ran.txt");
    let mut home_inside = dirs.policy(SandboxMode::WorkspaceWrite);
    home_inside.namespaces = false;
    home_inside.dsh_home = Some(dirs.ws("home"));
    let mut require = dirs.policy(SandboxMode::WorkspaceWrite);
    require.namespaces = false;
    require.protect = dsh_guard::Protect::Require;
    for (policy, cause) in [
        (home_inside, "move DSH_HOME out of the workspace"),
        (require, "protect = \"require\""),
    ] {
        let exec = guarded(policy);
        let spec = exec
            .resolve(ShellExecRequest::new(format!("touch {}", q(&marker))))
            .unwrap();
        match exec.run(spec).await {
            Err(ShellError::Refused { code, message }) => {
                assert_eq!(code, SANDBOX_UNAVAILABLE);
                assert!(message.contains(cause), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(!marker.exists());
        exec.dispose().await;
    }
    // Best effort without namespaces runs, and the carve-outs are not there (the gap dsh
    // reports once).
    let mut best_effort = dirs.policy(SandboxMode::WorkspaceWrite);
    best_effort.namespaces = false;
    std::fs::create_dir_all(dirs.ws(".git")).unwrap();
    let exec = guarded(best_effort);
    let out = run(&exec, "echo x > .git/config && echo written").await;
    assert_eq!(out.stdout.text, "written\n", "{}", out.stderr.text);
    exec.dispose().await;
}

#[tokio::test]
async fn a_kernel_below_min_abi_refuses() {
    let dirs = Dirs::new();
    let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
    policy.min_abi = Some(dsh_guard::kernel_abi() + 1);
    let exec = guarded(policy);
    let spec = exec.resolve(ShellExecRequest::new("true")).unwrap();
    match exec.run(spec).await {
        Err(ShellError::Refused { message, .. }) => {
            assert!(message.contains("min_abi"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    exec.dispose().await;
}

#[tokio::test]
async fn descriptors_dsh_inherited_never_reach_a_command() {
    // A listening socket and a file outside the roots, inheritable (no close-on-exec), as if
    // dsh's own parent had leaked them.
    let dirs = Dirs::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let file = std::fs::File::create(dirs.out("leaked.txt")).unwrap();
    for fd in [listener.as_fd(), file.as_fd()] {
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .unwrap();
    }
    for namespaces in [true, false] {
        let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
        policy.namespaces = namespaces;
        let exec = guarded(policy);
        let out = run(&exec, "for f in /proc/self/fd/*; do readlink \"$f\"; done").await;
        assert!(!out.stdout.text.contains("socket:"), "{}", out.stdout.text);
        assert!(
            !out.stdout.text.contains("leaked.txt"),
            "{}",
            out.stdout.text
        );
        exec.dispose().await;
    }
    drop((listener, file));
}

#[tokio::test]
async fn a_command_outside_the_roots_is_refused_for_nobody_too() {
    let dirs = Dirs::new();
    for user in User::all() {
        let exec = guarded_as(dirs.policy(SandboxMode::WorkspaceWrite), user);
        let out = run(
            &exec,
            &format!(
                "echo in > {} && echo out > {}",
                q(&dirs.ws("in.txt")),
                q(&dirs.out("out.txt"))
            ),
        )
        .await;
        assert!(denied(&out.stderr.text), "{user:?}: {}", out.stderr.text);
        assert!(dirs.ws("in.txt").exists(), "{user:?}");
        assert!(!dirs.out("out.txt").exists(), "{user:?}");
        std::fs::remove_file(dirs.ws("in.txt")).unwrap();
        exec.dispose().await;
    }
}

#[tokio::test]
async fn a_command_cannot_swap_the_scratch_directory_spill_files_go_to() {
    let dirs = Dirs::new();
    for namespaces in [true, false] {
        let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
        policy.namespaces = namespaces;
        let mut config = common::config();
        // In dsh: $DSH_HOME/scratch, outside every writable root.
        config.scratch_dir = Some(dirs.out("scratch"));
        config.default_workdir = Some(policy.workspace.clone());
        let supervision = dsh_guard::GuardSupervision::new(policy, guarded::program(User::Me));
        let exec = dsh_shell::LocalShellExecutor::new(config)
            .unwrap()
            .with_supervision(std::sync::Arc::new(supervision));
        let first = run(&exec, "seq 1 40000").await;
        let spill = first.stdout.spill_path.clone().unwrap();
        let dir = spill.parent().unwrap();
        let out = run(
            &exec,
            &format!(
                "mv {d} {d}.moved && ln -s /tmp {d} && echo swapped",
                d = q(dir)
            ),
        )
        .await;
        assert!(!out.stdout.text.contains("swapped"), "{}", out.stdout.text);
        assert!(denied(&out.stderr.text), "{}", out.stderr.text);
        assert!(dir.is_dir() && !dir.is_symlink());
        exec.dispose().await;
    }
}
