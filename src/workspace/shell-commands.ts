// The simple commands of a shell text, as far as the readers of .envrc files and hook commands
// need them (path-sources.ts, named-scripts.ts): words with their quotes and backslashes removed
// (adjacent quoted and bare parts make one word), lines joined at a backslash-newline, commands
// split at unquoted `;`, `&`, `|`, `&&`, `||`, line ends and parentheses, the keywords that start a
// compound command (`if`, `then`, `do`, `!`, `{`, ...) dropped from a command's front, and a `#`
// that starts a word ending the line. One pass over the text, whatever it holds (the host's own
// files, read before the run, but a repository cloned from anyone writes them).

const KEYWORDS = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "!",
  "time",
  "builtin",
  "command",
  "exec",
]);

/** How deep `eval`'s words are read again as a command line. */
const MAX_EVAL_DEPTH = 2;

export function shellCommands(text: string, depth = 0): string[][] {
  const commands: string[][] = [];
  let words: string[] = [];
  let word: string | undefined;
  const endWord = () => {
    if (word !== undefined) words.push(word);
    word = undefined;
  };
  const endCommand = () => {
    endWord();
    let start = 0;
    while (start < words.length && KEYWORDS.has(words[start]!)) start++;
    // `eval "source_env x"` runs its words as a command line of their own: a run of evals is
    // stripped first and the rest read once (`eval eval …` re-read the line per eval: quadratic,
    // then the stack), and only so deep.
    let evals = start;
    while (evals < words.length && words[evals] === "eval") evals++;
    const command = words.slice(evals);
    if (evals > start && depth < MAX_EVAL_DEPTH) commands.push(...shellCommands(command.join(" "), depth + 1));
    else if (command.length > 0) commands.push(command);
    words = [];
  };
  /** Here-documents whose bodies start at the next line: their delimiters, and whether tabs are stripped. */
  const hereDocs: Array<{ delimiter: string; tabs: boolean }> = [];
  /** Skips the here-document bodies that start after the line end at `at`; returns where the next line starts. */
  const skipHereDocs = (at: number): number => {
    let next = at + 1;
    for (const { delimiter, tabs } of hereDocs.splice(0)) {
      while (next < text.length) {
        const end = text.indexOf("\n", next);
        const line = text.slice(next, end < 0 ? text.length : end);
        next = end < 0 ? text.length : end + 1;
        if ((tabs ? line.replace(/^\t+/, "") : line) === delimiter) break;
      }
    }
    return next;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "<" && text[i + 1] === "<" && text[i + 2] !== "<" && !/^[0-9]*$/.test(word ?? "x")) {
      // A here-document (`cat <<EOF`, `cat<<EOF`): its body is data, read up to its delimiter line.
      // Not a shift in arithmetic (`x <<= 1`, `1<<2`): a delimiter starts with neither `=` nor a digit.
      let j = i + 2;
      const tabs = text[j] === "-";
      if (tabs) j++;
      while (text[j] === " " || text[j] === "\t") j++;
      let end = j;
      while (end < text.length && !/[\s;&|()<>]/.test(text[end]!)) end++;
      const delimiter = text.slice(j, end).replace(/["'\\]/g, "");
      if (delimiter === "" || /^[=0-9]/.test(delimiter)) {
        endWord();
        continue;
      }
      endWord();
      hereDocs.push({ delimiter, tabs });
      i = end - 1;
    } else if (c === "$" && text[i + 1] === "'") {
      // ANSI-C quoting: backslash escapes inside.
      let j = i + 2;
      let part = "";
      for (; j < text.length && text[j] !== "'"; j++) {
        if (text[j] === "\\" && j + 1 < text.length) j++;
        part += text[j];
      }
      word = (word ?? "") + part;
      i = j;
    } else if (c === "\\") {
      // A backslash-newline joins lines; any other backslash keeps the next character as it is.
      if (text[i + 1] !== "\n") word = (word ?? "") + (text[i + 1] ?? "");
      i++;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      const close = end < 0 ? text.length : end;
      word = (word ?? "") + text.slice(i + 1, close);
      i = close;
    } else if (c === '"') {
      let part = "";
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === "\\" && j + 1 < text.length && '"\\$`\n'.includes(text[j + 1]!)) j++;
        if (text[j] !== "\n" || text[j - 1] !== "\\") part += text[j];
      }
      word = (word ?? "") + part;
      i = j;
    } else if (c === "#" && word === undefined) {
      while (i + 1 < text.length && text[i + 1] !== "\n") i++;
    } else if (c === " " || c === "\t" || c === "\r") endWord();
    else if (c === "\n") {
      endCommand();
      if (hereDocs.length > 0) i = skipHereDocs(i) - 1;
    } else if (c === ";" || c === "&" || c === "|" || c === "(" || c === ")") endCommand();
    else if ((c === "{" || c === "}") && word === undefined && /[\s;]/.test(text[i + 1] ?? " ")) endCommand();
    else word = (word ?? "") + c;
  }
  endCommand();
  return commands;
}

/** Every word of every command of the text. */
export function shellWords(text: string): string[] {
  return shellCommands(text).flat();
}
