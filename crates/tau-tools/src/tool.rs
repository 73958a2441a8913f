//! The struct and [`AgentTool`](tau_agent::AgentTool) impl of a built-in tool, written once.
//! The tools differ only in their module's `DESCRIPTION` and `PARAMETERS` and their own
//! `run(&self, arguments, cancel)`, which is public so that callers without an agent loop
//! (tests, benchmarks) can run a tool with just a cancellation token. `bash` is written out by
//! hand: its `execute` also streams progress updates.

/// `arguments: owned` hands `run` the arguments map, `arguments: borrowed` a reference to it;
/// `prepare_arguments: f` makes `f` the tool's `prepare_arguments`.
///
/// `request: R` writes `run` too, for the tools whose work is all filesystem calls (`grep`,
/// `find`, `ls`): `R::parse(&env, &arguments)` checks the arguments on the async side and
/// `R::execute(self, &stop)` does the work on the blocking pool, winding down once `stop`
/// turns true (see [`run_blocking`](crate::walk::run_blocking)).
macro_rules! builtin_tool {
    (@pass owned $arguments:ident) => {
        $arguments
    };
    (@pass borrowed $arguments:ident) => {
        &$arguments
    };
    (
        $(#[$attr:meta])*
        $tool:ident, $name:literal, request: $request:ident $(,)?
    ) => {
        $crate::tool::builtin_tool!($(#[$attr])* $tool, $name, arguments: borrowed);

        impl $tool {
            /// Runs one call; `execute` delegates here. `Err` carries the error text.
            pub async fn run(
                &self,
                arguments: &::serde_json::Map<String, ::serde_json::Value>,
                cancel: &::tokio_util::sync::CancellationToken,
            ) -> Result<::tau_protocol::AgentToolResult, String> {
                let request = $request::parse(&self.env, arguments)?;
                $crate::walk::run_blocking(cancel, move |stop| request.execute(stop)).await
            }
        }
    };
    (
        $(#[$attr:meta])*
        $tool:ident, $name:literal, arguments: $pass:ident
        $(, prepare_arguments: $prepare:path)? $(,)?
    ) => {
        $(#[$attr])*
        pub struct $tool {
            env: ::std::sync::Arc<$crate::ToolEnv>,
        }

        impl $tool {
            pub fn new(env: ::std::sync::Arc<$crate::ToolEnv>) -> Self {
                Self { env }
            }
        }

        impl ::tau_agent::AgentTool for $tool {
            fn name(&self) -> &str {
                $name
            }

            fn description(&self) -> &str {
                &DESCRIPTION
            }

            fn parameters(&self) -> &::serde_json::Value {
                &PARAMETERS
            }

            $(
                fn prepare_arguments(
                    &self,
                    arguments: ::serde_json::Map<String, ::serde_json::Value>,
                ) -> ::serde_json::Map<String, ::serde_json::Value> {
                    $prepare(arguments)
                }
            )?

            fn execute<'a>(
                &'a self,
                _call_id: &'a str,
                arguments: ::serde_json::Map<String, ::serde_json::Value>,
                context: ::tau_agent::ToolContext,
            ) -> ::futures_util::future::BoxFuture<
                'a,
                Result<::tau_protocol::AgentToolResult, String>,
            > {
                Box::pin(async move {
                    self.run(
                        $crate::tool::builtin_tool!(@pass $pass arguments),
                        &context.cancel,
                    )
                    .await
                })
            }
        }
    };
}
pub(crate) use builtin_tool;
