#![allow(clippy::unwrap_used)]
//! The guard (dsh-guard) asking through the bridge: its `Ask` becomes a
//! `session/request_permission` to the editor, and the answer decides and is logged.

mod common;

use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use common::*;
use dsh_acp::ApprovalPolicy;
use dsh_guard::{Guard, Rule, Rules, SandboxMode, SandboxPolicy};
use dsh_testkit::Script;

fn guard_asking_for_touch(h: &H) -> dsh_guard::Installed {
    let rules = Rules {
        ask: vec![Rule::parse("touch").unwrap()],
        ..Rules::default()
    };
    let guard = Guard {
        sandbox: SandboxPolicy::new(SandboxMode::WorkspaceWrite, &h.cwd),
        approval: dsh_guard::ApprovalPolicy::Ask,
        rules,
    };
    dsh_guard::install(&h.ctx, Arc::new(guard)).unwrap()
}

#[tokio::test]
async fn the_guards_ask_round_trips_an_acp_permission_request() {
    for (answer, runs, logged) in [("allow-once", 1, "allowed"), ("reject-once", 0, "rejected")] {
        let h = H::new().await;
        let tool = TouchTool::default();
        h.register(tool.clone());
        let _guard = guard_asking_for_touch(&h);
        h.adapter
            .push(Script::tool_call("c1", "touch", "{}"))
            .push(Script::text("ok"));
        // The editor's own per-call prompt is off (auto mode): only the guard asks.
        let mut conn = h
            .connect(options().with_approval(ApprovalPolicy::Never))
            .await;
        conn.set_answer(Answer::Select(answer));
        let id = conn.session().await;
        assert_eq!(
            conn.prompt_now(&id, "go").await.unwrap(),
            StopReason::EndTurn
        );
        assert_eq!(tool.runs(), runs, "{answer}");
        let asked = conn.asked.try_recv().unwrap();
        assert_eq!(&*asked.tool_call.tool_call_id.0, "c1");
        let decisions = dsh_guard::logged_decisions(h.agent(&id).unwrap().session());
        assert_eq!(decisions[0]["verdict"], "ask");
        assert_eq!(decisions[0]["rule"], "ask touch");
        assert_eq!(decisions[1]["answer"], logged);
        conn.disconnect().await.unwrap();
    }
}
