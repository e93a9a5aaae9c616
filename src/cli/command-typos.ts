// `sandbox-run doctr` is a mistyped command, not a task: taken as the prompt, it would start a run
// (a paid one when SANDBOX_RUN_MODEL is set). A prompt given as separate words whose first word is
// a command name in another case, its plural (`policies`), or one or two typos away from one, and
// that is either that one word, or followed by one of that command's own subcommands (`imag build`),
// or by the one operand the command takes (`complition bash`), is refused with the command it
// probably meant. So is a prompt of one word that names, or is a typo away from, one of the
// program's options (`version`: `sandbox-run --version`, as docker, kubectl and helm have it), that
// names a command's subcommand (`list`: `sandbox-run policy list`), or that is another tool's
// name for a command (`status`: `sandbox-run doctor`; `run`: the task is given to sandbox-run itself).
// `sandbox-run -- doctr` always sends it as the prompt.
import { usageError } from "../errors.js";
import { editDistance } from "../util/edit-distance.js";

export interface CommandShape {
  name: string;
  subcommands: readonly string[];
  /** The command takes an operand (`replay <record-dir>`, `completion <shell>`). */
  takesOperand?: boolean;
}

export interface OptionShape {
  /** The long flag: "--version", "--model", "--no-build". */
  long: string;
  /** The value it takes, as its help writes it ("<provider/id>"); none for a switch. */
  value?: string;
}

/** Other tools' names for a command, taken when the prompt is that one word. */
const OTHER_NAMES: Readonly<Record<string, string>> = {
  status: "doctor",
  info: "doctor",
  check: "doctor",
  clean: "gc",
  cleanup: "gc",
};

/** Throws a usage error when the prompt's words look like a mistyped command or option. */
export function refuseCommandLikePrompt(
  promptParts: readonly string[],
  commands: readonly CommandShape[],
  argv: readonly string[],
  options: readonly OptionShape[] = [],
): void {
  const [first, second, ...rest] = promptParts;
  if (first === undefined || argv.includes("--") || /\s/.test(first)) return;
  const prompt = promptParts.join(" ");
  const asPrompt = `to send it to the agent as the prompt, write \`sandbox-run -- ${prompt}\``;
  if (second === undefined && first.toLowerCase() === "run" && !commands.some((c) => c.name === "run")) {
    throw usageError(
      `"${prompt}" looks like a command, not a task: sandbox-run has no \`run\` command, it runs the task it is given.`,
      `Write the task itself (\`sandbox-run "fix the failing test"\`); ${asPrompt}.`,
    );
  }
  const meant =
    commandMeant(first, second, rest, commands) ??
    (second === undefined ? wordMeant(first, commands, options) : undefined);
  if (!meant) return;
  if (meant.kind === "option") {
    throw usageError(
      `"${prompt}" looks like the option \`${meant.usage}\`, not a task.`,
      `Write it with its two dashes (\`sandbox-run ${meant.usage}${meant.usage === "--version" ? "" : " ..."}\`; \`sandbox-run --help\` lists the options); ${asPrompt}.`,
    );
  }
  throw usageError(
    `"${prompt}" looks like the command \`sandbox-run ${meant.usage}\`, not a task.`,
    `Run \`sandbox-run ${meant.usage}\` (\`sandbox-run help\` lists the commands); ${asPrompt}.`,
  );
}

interface Meant {
  kind: "command" | "option";
  usage: string;
}

/** A command (by name, plural or typo), alone or with one of its subcommands or its operand. */
function commandMeant(
  first: string,
  second: string | undefined,
  rest: readonly string[],
  commands: readonly CommandShape[],
): Meant | undefined {
  const name = closestCommand(
    first,
    commands.map((c) => c.name),
  );
  const meant = commands.find((c) => c.name === name);
  if (!meant) return undefined;
  const oneWord = second === undefined;
  const withSubcommand = second !== undefined && rest.length === 0 && meant.subcommands.includes(second);
  const withOperand = second !== undefined && rest.length === 0 && meant.takesOperand === true;
  if (!oneWord && !withSubcommand && !withOperand) return undefined;
  return { kind: "command", usage: [meant.name, ...(oneWord ? [] : [second])].join(" ") };
}

/** One word: an option's name (or a typo of one), a command's subcommand, another tool's name for a command. */
function wordMeant(
  first: string,
  commands: readonly CommandShape[],
  options: readonly OptionShape[],
): Meant | undefined {
  const word = first.toLowerCase();
  const option = (o: OptionShape): Meant => ({
    kind: "option",
    usage: `${o.long}${o.value ? ` ${o.value}` : ""}`,
  });
  const named = options.find((o) => o.long === `--${word}`);
  if (named) return option(named);
  // Subcommands by their exact name only: a typo of a short word (`lint` for `list`) is a likely task.
  const parent = commands.find((c) => c.name !== "help" && c.subcommands.includes(word));
  if (parent) return { kind: "command", usage: `${parent.name} ${word}` };
  const other = OTHER_NAMES[word];
  if (other && commands.some((c) => c.name === other)) return { kind: "command", usage: other };
  // A typo of an option: one edit, of a name of five letters or more (`verison`).
  const typo = options.find((o) => {
    const name = o.long.slice(2);
    return name.length >= 5 && Math.abs(word.length - name.length) <= 1 && editDistance(word, name) <= 1;
  });
  return typo && option(typo);
}

/** `policies` for `policy`, `images` for `image`. */
function isPluralOf(word: string, name: string): boolean {
  return word === `${name}s` || word === `${name}es` || (name.endsWith("y") && word === `${name.slice(0, -1)}ies`);
}

/** The command a word names or probably meant (another case, a plural, a typo or two away), if any. */
export function closestCommand(word: string, names: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  return (
    names.find((n) => n === lower) ?? names.find((n) => isPluralOf(lower, n)) ?? names.find((n) => looksLike(word, n))
  );
}

/**
 * The same name in another case, or a typo or two away (one for short names; never for two letters).
 * Two only when the first letter is right: a mistyped command keeps it (`dcotor`), while a word two
 * edits from a command elsewhere is more likely a task (`deploy` is not `replay`).
 */
function looksLike(word: string, name: string): boolean {
  const a = word.toLowerCase();
  if (a === name) return true;
  if (name.length <= 2 || Math.abs(a.length - name.length) > 2) return false;
  const allowed = name.length >= 6 && a[0] === name[0] ? 2 : 1;
  return editDistance(a, name) <= allowed;
}
