// The simple commands of a shell text, as far as the readers of .envrc files and hook commands
// need them (path-sources.ts, named-scripts.ts): words with their quotes and backslashes removed
// (adjacent quoted and bare parts make one word), lines joined at a backslash-newline, commands
// split at unquoted `;`, `&`, `|`, `&&`, `||`, line ends and parentheses, the keywords that start a
// compound command (`if`, `then`, `do`, `!`, `{`, ...) dropped from a command's front, and a `#`
// that starts a word ending the line. One pass over the text, whatever it holds (the host's own
// files, read before the run, but a repository cloned from anyone writes them).

const KEYWORDS = new Set(["if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time"]);

export function shellCommands(text: string): string[][] {
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
    if (start < words.length) commands.push(words.slice(start));
    words = [];
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\") {
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
    else if (c === "\n" || c === ";" || c === "&" || c === "|" || c === "(" || c === ")") endCommand();
    else word = (word ?? "") + c;
  }
  endCommand();
  return commands;
}

/** Every word of every command of the text. */
export function shellWords(text: string): string[] {
  return shellCommands(text).flat();
}
