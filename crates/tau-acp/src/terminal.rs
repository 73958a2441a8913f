//! `bash` in the editor's terminal (`terminal/*`) when the client offers `terminal`: the
//! command is created there, waited for, killed on abort or timeout, its output read and the
//! terminal released, through [`tau_tools::CommandRunner`]; the tool keeps its own rules and
//! result texts (`tau-tools/src/bash/client.rs`). The call shows the terminal itself: the
//! tool's progress names it (`details.terminalId`) and the translator embeds it (`updates.rs`).

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, EnvVariable, KillTerminalRequest, ReleaseTerminalRequest,
    TerminalOutputRequest, WaitForTerminalExitRequest,
};
use tau_tools::{
    ClientCommand, CommandExit, CommandFuture, CommandOutput, CommandRunner, RunningCommand,
};

/// One session's way to the client's terminals.
#[derive(Clone)]
pub struct ClientTerminals {
    pub cx: ConnectionTo<Client>,
    pub session: String,
}

impl std::fmt::Debug for ClientTerminals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTerminals")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl CommandRunner for ClientTerminals {
    fn create<'a>(
        &'a self,
        command: &'a ClientCommand,
    ) -> CommandFuture<'a, Box<dyn RunningCommand>> {
        Box::pin(async move {
            let env = command
                .env
                .iter()
                .map(|(name, value)| EnvVariable::new(name.clone(), value.clone()))
                .collect();
            let request = CreateTerminalRequest::new(self.session.clone(), command.program.clone())
                .args(command.args.clone())
                .env(env)
                .cwd(command.cwd.clone())
                .output_byte_limit(command.output_byte_limit);
            let response = self
                .cx
                .send_request(request)
                .block_task()
                .await
                .map_err(|err| err.message)?;
            Ok(Box::new(Terminal {
                cx: self.cx.clone(),
                session: self.session.clone(),
                id: response.terminal_id.0.to_string(),
            }) as Box<dyn RunningCommand>)
        })
    }
}

/// One terminal the client made for a command.
struct Terminal {
    cx: ConnectionTo<Client>,
    session: String,
    id: String,
}

impl RunningCommand for Terminal {
    fn id(&self) -> &str {
        &self.id
    }

    fn wait_for_exit(&self) -> CommandFuture<'_, CommandExit> {
        Box::pin(async move {
            let request = WaitForTerminalExitRequest::new(self.session.clone(), self.id.clone());
            let response = self
                .cx
                .send_request(request)
                .block_task()
                .await
                .map_err(|err| err.message)?;
            Ok(CommandExit {
                code: response.exit_status.exit_code,
                signal: response.exit_status.signal,
            })
        })
    }

    fn kill(&self) -> CommandFuture<'_, ()> {
        Box::pin(async move {
            let request = KillTerminalRequest::new(self.session.clone(), self.id.clone());
            self.cx
                .send_request(request)
                .block_task()
                .await
                .map(drop)
                .map_err(|err| err.message)
        })
    }

    fn output(&self) -> CommandFuture<'_, CommandOutput> {
        Box::pin(async move {
            let request = TerminalOutputRequest::new(self.session.clone(), self.id.clone());
            let response = self
                .cx
                .send_request(request)
                .block_task()
                .await
                .map_err(|err| err.message)?;
            Ok(CommandOutput {
                text: response.output,
                truncated: response.truncated,
            })
        })
    }

    fn release(&self) -> CommandFuture<'_, ()> {
        Box::pin(async move {
            let request = ReleaseTerminalRequest::new(self.session.clone(), self.id.clone());
            self.cx
                .send_request(request)
                .block_task()
                .await
                .map(drop)
                .map_err(|err| err.message)
        })
    }
}
