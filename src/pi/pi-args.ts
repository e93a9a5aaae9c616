// Pi's command line for one sandboxed run. Discovery is off so nothing from the untrusted
// workspace (.pi/ extensions, settings, skills, prompt templates, MCP servers) loads; the
// only extension is our final tool, baked into the image.
import { usageError } from "../errors.js";

export const FINAL_TOOL_NAME = "sandbox_run_final_result";
export const FINAL_TOOL_DESCRIPTION =
  "Submit the final result of the task as structured data matching this tool's parameters. " +
  "Call it exactly once, when the task is complete; the run ends when it succeeds.";
/**
 * What the final-tool extension tells a model that ended its turn in plain text without calling the
 * tool (at most twice); the gateway's ledger takes exactly this message as Pi's own continuation.
 */
export const FINAL_TOOL_REMINDER =
  `You ended your turn without calling ${FINAL_TOOL_NAME}. Your answer reaches the caller only ` +
  `through that tool: call ${FINAL_TOOL_NAME} now with the result.`;
const FINAL_TOOL_INSTRUCTION =
  `When the task is complete, call the ${FINAL_TOOL_NAME} tool exactly once with the final result. ` +
  "Do not give the final answer as plain text.";

/** Flags that would change the protocol, the tool set, the session or what gets loaded. */
const RESERVED_FLAGS = new Set([
  "--mode",
  "--print",
  "-p",
  "--no-session",
  "--session",
  "--session-id",
  "--session-dir",
  "--continue",
  "-c",
  "--resume",
  "-r",
  "--fork",
  "--extension",
  "-e",
  "--no-extensions",
  "-ne",
  "--approve",
  "-a",
  "--no-approve",
  "-na",
  "--tools",
  "-t",
  "--no-tools",
  "-nt",
  "--no-builtin-tools",
  "-nbt",
  "--exclude-tools",
  "-xt",
  "--skill",
  "--no-skills",
  "-ns",
  "--prompt-template",
  "--no-prompt-templates",
  "-np",
  "--no-context-files",
  "-nc",
  "--no-mcp",
  "--model",
  "--provider",
  "--api-key",
  "--offline",
  "--export",
  "--list-models",
  "--models",
  "--theme",
  "--no-themes",
  "--",
  "--help",
  "-h",
  "--version",
  "-v",
]);

/** Pi flags a caller may pass that take a value as the next argument. */
const VALUE_FLAGS = new Set(["--thinking", "--system-prompt", "--append-system-prompt", "--name", "-n"]);

export function checkExtraArgs(extraArgs: readonly string[]): void {
  extraArgs.forEach((arg, index) => {
    // A value directly after one of Pi's value-taking flags (`--thinking high`) belongs to it;
    // anywhere else a bare word would become an extra prompt.
    if (!arg.startsWith("-") && index > 0 && VALUE_FLAGS.has(extraArgs[index - 1]!)) return;
    const flag = arg.split("=")[0] ?? arg;
    if (RESERVED_FLAGS.has(flag)) {
      throw usageError(
        `extraArgs may not contain ${flag}: sandbox-run sets it to keep the run's protocol and boundary.`,
        "Use the matching sandbox-run option instead (model, schema, sandbox/policy), or drop the flag.",
      );
    }
    if (!arg.startsWith("-")) {
      throw usageError(
        `extraArgs may contain only flags and their values, not "${arg}".`,
        "Pass the prompt as the prompt argument.",
      );
    }
  });
}

interface PiArgsInput {
  /** Where the final-tool extension lives in the image. */
  finalToolExtension: string;
  model: string;
  tools: readonly string[];
  finalToolName?: string;
  contextFiles: boolean;
  extraArgs: readonly string[];
}

export function buildPiArgs(input: PiArgsInput): string[] {
  const tools = input.finalToolName ? [...input.tools, input.finalToolName] : [...input.tools];
  return [
    "--mode",
    "json",
    "--no-session",
    "--no-extensions",
    "--no-approve",
    "--no-skills",
    "--no-prompt-templates",
    "--no-themes",
    "--no-mcp",
    "--offline",
    ...(input.contextFiles ? [] : ["--no-context-files"]),
    "--model",
    input.model,
    "--tools",
    tools.join(","),
    ...(input.finalToolName
      ? ["--extension", input.finalToolExtension, "--append-system-prompt", FINAL_TOOL_INSTRUCTION]
      : []),
    ...input.extraArgs,
  ];
}
