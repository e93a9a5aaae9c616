// Pi extension: registers the one-off terminating tool whose parameters are the caller's
// JSON Schema. Pi validates the model's arguments against it; a successful call ends the
// agent loop and its arguments come back as the tool result's `details`.
export default function registerFinalTool(pi) {
  const tool = globalThis.__sandboxRunFinalTool;
  if (!tool) return;
  pi.registerTool({
    name: tool.name,
    label: "Final result",
    description: tool.description,
    parameters: tool.parameters,
    async execute(_toolCallId, params) {
      return {
        content: [{ type: "text", text: "Result accepted." }],
        details: params,
        terminate: true,
      };
    },
  });
}
