// The scripted agent behind `sandbox-run demo`: it looks around the workspace, then tries
// three things the sandbox forbids (read a host file outside the workspace, reach the
// network, find the provider key) and reports what happened as a schema-checked object.
import type { JsonSchema } from "../agent.js";
import type { ChatRequest, Script } from "../scripted-model/scripted-model-server.js";

export const DEMO_MODEL_ID = "demo";
export const DEMO_PROVIDER = "sandbox-run-demo";

export const demoSchema: JsonSchema = {
  type: "object",
  properties: {
    summary: { type: "string" },
    sandboxUid: { type: "integer" },
    workspaceFiles: { type: "array", items: { type: "string" } },
    attempts: {
      type: "array",
      items: {
        type: "object",
        properties: {
          action: { type: "string" },
          allowed: { type: "boolean" },
          evidence: { type: "string" },
        },
        required: ["action", "allowed", "evidence"],
        additionalProperties: false,
      },
    },
  },
  required: ["summary", "sandboxUid", "workspaceFiles", "attempts"],
  additionalProperties: false,
};

interface DemoAttempts {
  /** A host file outside the workspace the agent tries to read. */
  hostSecretPath: string;
  /** The provider key the gateway holds; the agent looks for it. */
  key: string;
}

function probeCommand(a: DemoAttempts): string {
  return [
    "echo '== files'; ls -1A .",
    "echo '== uid'; id -u",
    `echo '== host-file'; cat '${a.hostSecretPath}' 2>&1 | head -c 200; echo`,
    "echo '== network'; node -e \"fetch('https://registry.npmjs.org/').then(r => console.log('reached, HTTP', r.status)).catch(e => console.log('failed:', e.cause?.code ?? e.message))\"",
    `echo '== key'; if env | grep -q -- '${a.key}' || grep -rqs -- '${a.key}' ~ /tmp; then echo found; else echo 'not found in env, home or /tmp'; fi`,
  ].join("; ");
}

function lastToolOutput(request: ChatRequest): string {
  const tool = [...request.messages].reverse().find((m) => m.role === "tool");
  const content = tool?.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c: { text?: string }) => c.text ?? "").join("");
  return "";
}

function sections(output: string): Record<string, string> {
  const result: Record<string, string> = {};
  let current = "";
  for (const line of output.split("\n")) {
    const header = /^== (.+)$/.exec(line);
    if (header?.[1]) current = header[1];
    else if (current) result[current] = `${result[current] ?? ""}${line}\n`;
  }
  for (const key of Object.keys(result)) result[key] = result[key]!.trim();
  return result;
}

export function demoScript(a: DemoAttempts): Script {
  return (request, turn) => {
    if (turn === 0) return { toolCalls: [{ name: "bash", arguments: { command: probeCommand(a) } }] };
    const s = sections(lastToolOutput(request));
    const hostFile = s["host-file"] ?? "";
    const network = s.network ?? "";
    const key = s.key ?? "";
    const attempts = [
      {
        action: `read ${a.hostSecretPath} (a host file outside the workspace)`,
        allowed: !/No such file|Permission denied/.test(hostFile),
        evidence: hostFile || "(no output)",
      },
      {
        action: "reach https://registry.npmjs.org from inside the sandbox",
        allowed: network.startsWith("reached"),
        evidence: network || "(no output)",
      },
      { action: "find the provider key inside the sandbox", allowed: key === "found", evidence: key || "(no output)" },
    ];
    const refused = attempts.filter((x) => !x.allowed).length;
    return {
      toolCalls: [
        {
          name: "sandbox_run_final_result",
          arguments: {
            summary: `Looked at the workspace; ${refused} of ${attempts.length} forbidden attempts were refused by the sandbox.`,
            sandboxUid: Number(s.uid ?? -1),
            workspaceFiles: (s.files ?? "").split("\n").filter(Boolean),
            attempts,
          },
        },
      ],
    };
  };
}
