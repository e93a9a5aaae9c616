// `sandbox-run doctr` is a mistyped command, not a task: taken as the prompt, it would start a run
// (a paid one when SANDBOX_RUN_MODEL is set). A prompt given as separate words whose first word is
// a command name in another case or one or two typos away from one, and that is either that one
// word, or followed by one of that command's own subcommands (`imag build`), or by the one operand
// the command takes (`complition bash`), is refused with the command it probably meant.
// `sandbox-run -- doctr` always sends it as the prompt.
import { usageError } from "../errors.js";

interface CommandShape {
  name: string;
  subcommands: readonly string[];
  /** The command takes an operand (`replay <record-dir>`, `completion <shell>`). */
  takesOperand?: boolean;
}

/** Throws a usage error when the prompt's words look like a mistyped command. */
export function refuseCommandLikePrompt(
  promptParts: readonly string[],
  commands: readonly CommandShape[],
  argv: readonly string[],
): void {
  const [first, second, ...rest] = promptParts;
  if (first === undefined || argv.includes("--") || /\s/.test(first)) return;
  const meant = commands.find((c) => looksLike(first, c.name));
  if (!meant) return;
  const oneWord = second === undefined;
  const withSubcommand = second !== undefined && rest.length === 0 && meant.subcommands.includes(second);
  const withOperand = second !== undefined && rest.length === 0 && meant.takesOperand === true;
  if (!oneWord && !withSubcommand && !withOperand) return;
  const command = [meant.name, ...(oneWord ? [] : [second])].join(" ");
  throw usageError(
    `"${promptParts.join(" ")}" looks like the command \`sandbox-run ${command}\`, not a task.`,
    `Run \`sandbox-run ${command}\` (\`sandbox-run help\` lists the commands); to send it to the agent as the prompt, write \`sandbox-run -- ${promptParts.join(" ")}\`.`,
  );
}

/** The same name in another case, or a typo or two away (one for short names; never for two letters). */
function looksLike(word: string, name: string): boolean {
  const a = word.toLowerCase();
  if (a === name) return true;
  if (name.length <= 2 || Math.abs(a.length - name.length) > 2) return false;
  const allowed = name.length >= 6 ? 2 : 1;
  return editDistance(a, name) <= allowed;
}

/** Damerau-Levenshtein (optimal string alignment): insertions, deletions, substitutions, swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}
