// Pi extension: registers the one-off terminating tool whose parameters are the caller's
// JSON Schema. Pi validates the model's arguments against it; a successful call ends the
// agent loop and its arguments come back as the tool result's `details`.
//
// A model that ends its turn in plain text without calling the tool (weaker and local models do)
// is reminded to call it, at most twice (each reminder is one more model request, counted by the
// gateway like any): before, the run failed at once with no result (review, session 29).
const MAX_REMINDERS = 2;

export default function registerFinalTool(pi) {
  const tool = globalThis.__sandboxRunFinalTool;
  if (!tool) return;
  let accepted = false;
  let reminders = 0;
  pi.registerTool({
    name: tool.name,
    label: "Final result",
    description: tool.description,
    parameters: tool.parameters,
    async execute(_toolCallId, params) {
      // Pi calls this only with arguments its validation accepted.
      accepted = true;
      return {
        content: [{ type: "text", text: "Result accepted." }],
        details: params,
        terminate: true,
      };
    },
  });
  pi.on("agent_before_settle", async (event) => {
    // The host gives the words (its gateway takes exactly them as Pi's own continuation).
    if (accepted || !tool.reminder || reminders >= MAX_REMINDERS) return undefined;
    reminders++;
    return {
      entries: [
        ...event.entries,
        {
          type: "custom_message",
          customType: "sandbox-run-final-reminder",
          content: tool.reminder,
          display: false,
        },
      ],
      continue: true,
    };
  });
}
