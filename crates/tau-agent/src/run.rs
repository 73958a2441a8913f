//! One agent run: `agent_start`, turns of (assistant reply, tool calls, results), steering
//! and follow-up delivery, `agent_end`, in the exact event order of pi 0.79 (`rpc.md` §4.4).

use std::sync::Arc;

use futures_util::future::{BoxFuture, join_all};
use serde_json::{Map, Value, json};
use tau_ai::provider::{Context, HttpClient, StreamOptions, Tool, stream};
use tau_protocol::{
    AgentEvent, AgentMessage, AgentToolResult, AssistantContent, AssistantMessage,
    AssistantMessageEvent, Message, Model, StopReason, TextContent, ToolCall, ToolResultMessage,
    Usage, UserContentBlock,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{AgentTool, ToolContext};

/// What a run needs to call the model.
#[derive(Clone)]
pub struct RunSpec {
    pub client: HttpClient,
    pub model: Model,
    pub system_prompt: Option<String>,
    pub tools: Vec<Arc<dyn AgentTool>>,
    /// Key, reasoning level, session id…; `cancel` is replaced by the run's token.
    pub options: StreamOptions,
}

/// The session side of a run: where events go and where the context lives.
pub trait RunHost: Send + Sync {
    /// Writes an event (in order).
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()>;
    /// Appends a message to the context.
    fn push_message(&self, message: AgentMessage);
    /// The context as the model sees it.
    fn llm_context(&self) -> Vec<Message>;
    /// Steering messages due now (per the steering mode).
    fn take_steering(&self) -> Vec<AgentMessage>;
    /// Follow-up messages due now (per the follow-up mode).
    fn take_follow_up(&self) -> Vec<AgentMessage>;
    /// A message taken from a queue is about to be delivered (right before its
    /// `message_start`, which is when pi reports the queue without it: `queue_update`).
    fn delivering(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// xcsh's `immediate` interrupt mode: a queued steering message cuts the running tool
    /// batch short. Read at every tool completion, so a change applies at once.
    fn interrupts_tools(&self) -> bool {
        false
    }
    /// Whether steering messages are waiting.
    fn has_steering(&self) -> bool {
        false
    }
    /// An assistant reply ended: called after its `message_end`, before its tools run (where
    /// a retry series reports its success).
    fn reply_ended<'a>(&'a self, _reply: &'a AssistantMessage) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
    /// Whether the host will retry after this failed reply (`agent_end.willRetry`).
    fn will_retry(&self, _reply: &AssistantMessage) -> bool {
        false
    }
    /// The context for the next model call when something other than [`RunHost::llm_context`]
    /// decides it (pi's `context` extension event); `None` keeps the usual one.
    fn context_override(&self) -> BoxFuture<'_, Option<Vec<Message>>> {
        Box::pin(async { None })
    }
    /// A tool finished (pi's `tool_result` extension event): the result and error flag to
    /// report, possibly patched.
    fn after_tool_result<'a>(
        &'a self,
        _call: &'a ToolCall,
        _arguments: &'a Map<String, Value>,
        result: AgentToolResult,
        is_error: bool,
    ) -> BoxFuture<'a, (AgentToolResult, bool)> {
        Box::pin(async move { (result, is_error) })
    }
    /// The tools and system prompt for the next model call when they changed during the run
    /// (pi's `setActiveTools` takes effect at the next call); `None` keeps the run's own.
    fn tools_now(&self) -> Option<(Vec<Arc<dyn AgentTool>>, String)> {
        None
    }
    /// The tools for the next model call when tools come and go on their own (MCP servers
    /// that finish starting or change their lists), given those the run would use now (after
    /// [`RunHost::tools_now`]); `None` keeps them. Called before every model call; the
    /// first call may wait (bounded) for tools still on their way.
    fn refresh_tools<'a>(
        &'a self,
        _current: &'a [Arc<dyn AgentTool>],
    ) -> BoxFuture<'a, Option<Vec<Arc<dyn AgentTool>>>> {
        Box::pin(async { None })
    }
    /// A message is complete (pi's `message_end` extension event, whose handlers may replace
    /// it, keeping its role): the message to report and keep.
    fn finish_message(&self, message: AgentMessage) -> BoxFuture<'_, AgentMessage> {
        Box::pin(async move { message })
    }
    /// A validated call is about to run (pi's `tool_call` extension event): returns the
    /// arguments to run it with (possibly rewritten), or why it is blocked.
    fn before_tool_call<'a>(
        &'a self,
        _call: &'a ToolCall,
        arguments: Map<String, Value>,
    ) -> BoxFuture<'a, Result<Map<String, Value>, String>> {
        Box::pin(async move { Ok(arguments) })
    }
}

/// What tools interrupted by steering report (xcsh's text).
pub const SKIPPED_FOR_STEERING: &str = "Skipped due to queued user message.";

/// Runs the agent on `prompts` until it stops; returns the messages the run added.
pub async fn run(
    spec: &RunSpec,
    prompts: Vec<AgentMessage>,
    host: &dyn RunHost,
    cancel: &CancellationToken,
) -> Vec<AgentMessage> {
    let mut added = Vec::new();
    let prompts_were_empty = prompts.is_empty();
    host.emit(AgentEvent::AgentStart).await;
    host.emit(AgentEvent::TurnStart).await;
    for message in prompts {
        // A prompt the session took from its queues leaves the reported queue here.
        host.delivering().await;
        deliver(host, message, &mut added).await;
    }
    let continuing = prompts_were_empty;
    let mut pending = host.take_steering();
    if continuing && pending.is_empty() {
        // A continuation (queued messages after an abort): follow-ups start it when no
        // steering is waiting.
        pending = host.take_follow_up();
    }
    let mut first = true;
    loop {
        let mut more_tools = true;
        while more_tools || !pending.is_empty() {
            if !first {
                host.emit(AgentEvent::TurnStart).await;
            }
            first = false;
            for message in std::mem::take(&mut pending) {
                host.delivering().await;
                deliver(host, message, &mut added).await;
            }
            let changed;
            let spec = match host.tools_now() {
                Some((tools, system_prompt)) => {
                    changed = RunSpec {
                        tools,
                        system_prompt: Some(system_prompt),
                        ..spec.clone()
                    };
                    &changed
                }
                None => spec,
            };
            let refreshed;
            let spec = match host.refresh_tools(&spec.tools).await {
                Some(tools) => {
                    refreshed = RunSpec {
                        tools,
                        ..spec.clone()
                    };
                    &refreshed
                }
                None => spec,
            };
            let reply = stream_reply(spec, host, cancel).await;
            host.reply_ended(&reply).await;
            added.push(AgentMessage::Assistant(reply.clone()));
            if matches!(reply.stop_reason, StopReason::Error | StopReason::Aborted) {
                let will_retry = reply.stop_reason == StopReason::Error && host.will_retry(&reply);
                host.emit(AgentEvent::TurnEnd {
                    message: AgentMessage::Assistant(reply),
                    tool_results: Vec::new(),
                })
                .await;
                host.emit(AgentEvent::AgentEnd {
                    messages: added.clone(),
                    will_retry,
                })
                .await;
                return added;
            }
            let calls: Vec<ToolCall> = reply
                .content
                .iter()
                .filter_map(|c| match c {
                    AssistantContent::ToolCall(call) => Some(call.clone()),
                    _ => None,
                })
                .collect();
            let results = if calls.is_empty() {
                more_tools = false;
                Vec::new()
            } else {
                let (results, terminate) = execute_tools(spec, host, cancel, &calls).await;
                more_tools = !terminate;
                for result in &results {
                    added.push(AgentMessage::ToolResult(result.clone()));
                }
                results
            };
            host.emit(AgentEvent::TurnEnd {
                message: AgentMessage::Assistant(reply),
                tool_results: results,
            })
            .await;
            pending = host.take_steering();
        }
        pending = host.take_follow_up();
        if pending.is_empty() {
            break;
        }
    }
    host.emit(AgentEvent::AgentEnd {
        messages: added.clone(),
        will_retry: false,
    })
    .await;
    added
}

async fn deliver(host: &dyn RunHost, message: AgentMessage, added: &mut Vec<AgentMessage>) {
    added.push(add_whole_message(host, message).await);
}

/// A message that exists whole at once (a prompt, a queued message, a tool result): its
/// `message_start` and `message_end` back to back, then it joins the context. Returns it as
/// finished (see [`RunHost::finish_message`]).
async fn add_whole_message(host: &dyn RunHost, message: AgentMessage) -> AgentMessage {
    host.emit(AgentEvent::MessageStart {
        message: message.clone(),
    })
    .await;
    let message = host.finish_message(message).await;
    host.emit(AgentEvent::MessageEnd {
        message: message.clone(),
    })
    .await;
    host.push_message(message.clone());
    message
}

/// Streams one assistant reply, emitting its message events; the final message is also
/// appended to the context.
async fn stream_reply(
    spec: &RunSpec,
    host: &dyn RunHost,
    cancel: &CancellationToken,
) -> AssistantMessage {
    let messages = match host.context_override().await {
        Some(messages) => messages,
        None => host.llm_context(),
    };
    let context = Context {
        system_prompt: spec.system_prompt.clone(),
        messages,
        tools: spec
            .tools
            .iter()
            .map(|t| Tool {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters().clone(),
            })
            .collect(),
    };
    // Lean events: the RPC writer keeps the snapshot itself (tau-rpc `snapshot`), which
    // avoids cloning the growing message for every delta.
    let options = StreamOptions {
        cancel: cancel.clone(),
        include_partial: false,
        ..spec.options.clone()
    };
    let mut events = stream(&spec.client, &spec.model, &context, options);
    let mut started = false;
    let mut last_partial: Option<AssistantMessage> = None;
    while let Some(event) = events.next_boxed().await {
        match *event {
            AssistantMessageEvent::Start { partial } => {
                started = true;
                host.emit(AgentEvent::MessageStart {
                    message: AgentMessage::Assistant(partial.clone()),
                })
                .await;
                last_partial = Some(partial);
            }
            AssistantMessageEvent::Done { message, .. }
            | AssistantMessageEvent::Error { error: message, .. } => {
                return end_reply(host, message, started).await;
            }
            // The box the provider sent goes on as it is: no copy of the event.
            _ => {
                host.emit(AgentEvent::MessageUpdate {
                    usage: None,
                    assistant_message_event: event,
                    message: None,
                })
                .await;
            }
        }
    }
    // The provider task ended without a result (it was dropped); report it as an error.
    let mut message = last_partial.unwrap_or_else(|| empty_reply(&spec.model));
    message.stop_reason = if cancel.is_cancelled() {
        StopReason::Aborted
    } else {
        StopReason::Error
    };
    message.error_message = Some(if cancel.is_cancelled() {
        "Request was aborted".into()
    } else {
        "The provider stream ended without a result".into()
    });
    end_reply(host, message, started).await
}

/// Closes a streamed reply: its `message_start` if the stream never sent one (it failed
/// before starting), the final message into the context, then `message_end`. Returns the
/// reply as finished (see [`RunHost::finish_message`]).
async fn end_reply(
    host: &dyn RunHost,
    message: AssistantMessage,
    started: bool,
) -> AssistantMessage {
    if !started {
        host.emit(AgentEvent::MessageStart {
            message: AgentMessage::Assistant(message.clone()),
        })
        .await;
    }
    let message = match host
        .finish_message(AgentMessage::Assistant(message.clone()))
        .await
    {
        AgentMessage::Assistant(finished) => finished,
        // The host keeps the role; anything else is ignored.
        _ => message,
    };
    host.push_message(AgentMessage::Assistant(message.clone()));
    host.emit(AgentEvent::MessageEnd {
        message: AgentMessage::Assistant(message.clone()),
    })
    .await;
    message
}

fn empty_reply(model: &Model) -> AssistantMessage {
    AssistantMessage {
        content: Vec::new(),
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        usage: Usage::default(),
        stop_reason: StopReason::Error,
        timestamp: tau_ai::now_ms(),
        response_id: None,
        response_model: None,
        diagnostics: None,
        error_message: None,
        retry_after_ms: None,
    }
}

fn text_result(text: String) -> AgentToolResult {
    AgentToolResult {
        extra: Default::default(),
        content: vec![UserContentBlock::Text(TextContent {
            text,
            text_signature: None,
        })],
        details: Some(json!({})),
        terminate: None,
    }
}

/// Runs one reply's tool calls: concurrently, unless one of the tools asks to run alone
/// (pi's `executionMode: "sequential"`), which makes the whole batch run one call after the
/// other, each from its start to its result message. Returns the results and whether every
/// tool asked to end the run.
async fn execute_tools(
    spec: &RunSpec,
    host: &dyn RunHost,
    cancel: &CancellationToken,
    calls: &[ToolCall],
) -> (Vec<ToolResultMessage>, bool) {
    let sequential = calls.iter().any(|call| {
        spec.tools
            .iter()
            .any(|t| t.name() == call.name && t.sequential())
    });
    if !sequential {
        return execute_batch(spec, host, cancel, calls).await;
    }
    let mut results = Vec::with_capacity(calls.len());
    let mut terminate = !calls.is_empty();
    for call in calls {
        let (mut one, ends) = execute_batch(spec, host, cancel, std::slice::from_ref(call)).await;
        terminate &= ends;
        results.append(&mut one);
    }
    (results, terminate)
}

/// Runs tool calls concurrently: starts in call order, ends in completion order, result
/// messages in call order.
async fn execute_batch(
    spec: &RunSpec,
    host: &dyn RunHost,
    cancel: &CancellationToken,
    calls: &[ToolCall],
) -> (Vec<ToolResultMessage>, bool) {
    let mut outcomes: Vec<Option<(AgentToolResult, bool)>> = vec![None; calls.len()];
    let mut runnable = Vec::new();
    // pi 1.x's `durationMs` runs from each call's `tool_execution_start` to its end.
    let mut started = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        started.push(std::time::Instant::now());
        host.emit(AgentEvent::ToolExecutionStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: json!(call.arguments),
            intent: None,
        })
        .await;
        let prepared = match spec.tools.iter().find(|t| t.name() == call.name) {
            None => Err(format!("Tool {} not found", call.name)),
            Some(_) if cancel.is_cancelled() => Err("Operation aborted".to_string()),
            Some(tool) => {
                let prepared = match tool.prepare_arguments_async(&call.arguments) {
                    Some(preparing) => preparing.await,
                    None => Ok(tool.prepare_arguments(call.arguments.clone())),
                };
                match prepared.and_then(|prepared| {
                    crate::validate_arguments(tool.name(), tool.parameters(), &prepared)
                }) {
                    Ok(arguments) => host
                        .before_tool_call(call, arguments)
                        .await
                        .map(|arguments| (Arc::clone(tool), arguments)),
                    Err(message) => Err(message),
                }
            }
        };
        match prepared {
            Ok((tool, arguments)) => runnable.push((i, tool, arguments)),
            Err(message) => {
                let result = text_result(message);
                end_event(host, call, &result, true, started[i]).await;
                outcomes[i] = Some((result, true));
            }
        }
    }
    // Steering in `immediate` mode cancels this batch, not the run.
    let batch = cancel.child_token();
    let interrupted = std::sync::atomic::AtomicBool::new(false);
    let finished = join_all(runnable.into_iter().map(|(i, tool, arguments)| {
        let call = &calls[i];
        let started = started[i];
        let batch = &batch;
        let interrupted = &interrupted;
        async move {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let context = ToolContext::new(batch.clone(), tx);
            let arguments_seen = arguments.clone();
            let mut execution = tool.execute(&call.id, arguments, context);
            let outcome = loop {
                tokio::select! {
                    biased;
                    Some(partial) = rx.recv() => update_event(host, call, partial).await,
                    outcome = &mut execution => break outcome,
                }
            };
            // Progress sent in the same poll that finished the tool is still reported.
            while let Ok(partial) = rx.try_recv() {
                update_event(host, call, partial).await;
            }
            use std::sync::atomic::Ordering;
            let (result, is_error) = if interrupted.load(Ordering::Acquire) {
                (text_result(SKIPPED_FOR_STEERING.to_string()), true)
            } else {
                let (result, is_error) = match outcome {
                    Ok(result) => (result, false),
                    Err(message) => (text_result(message), true),
                };
                host.after_tool_result(call, &arguments_seen, result, is_error)
                    .await
            };
            if !interrupted.load(Ordering::Acquire)
                && host.interrupts_tools()
                && host.has_steering()
            {
                interrupted.store(true, Ordering::Release);
                batch.cancel();
            }
            end_event(host, call, &result, is_error, started).await;
            (i, result, is_error)
        }
    }))
    .await;
    for (i, result, is_error) in finished {
        outcomes[i] = Some((result, is_error));
    }
    let mut results = Vec::with_capacity(calls.len());
    let mut terminate = !calls.is_empty();
    for (call, outcome) in calls.iter().zip(outcomes) {
        let (result, is_error) =
            outcome.unwrap_or_else(|| (text_result("No result provided".into()), true));
        terminate &= result.terminate == Some(true);
        let message = ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: result.content,
            details: result.details,
            is_error,
            timestamp: tau_ai::now_ms(),
        };
        let message = match add_whole_message(host, AgentMessage::ToolResult(message.clone())).await
        {
            AgentMessage::ToolResult(finished) => finished,
            _ => message,
        };
        results.push(message);
    }
    (results, terminate)
}

async fn update_event(host: &dyn RunHost, call: &ToolCall, partial: AgentToolResult) {
    host.emit(AgentEvent::ToolExecutionUpdate {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        args: json!(call.arguments),
        partial_result: partial,
    })
    .await;
}

async fn end_event(
    host: &dyn RunHost,
    call: &ToolCall,
    result: &AgentToolResult,
    is_error: bool,
    started: std::time::Instant,
) {
    let elapsed = started.elapsed().as_millis();
    host.emit(AgentEvent::ToolExecutionEnd {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        result: result.clone(),
        is_error,
        is_warning: None,
        duration_ms: Some(u64::try_from(elapsed).unwrap_or(u64::MAX)),
    })
    .await;
}
