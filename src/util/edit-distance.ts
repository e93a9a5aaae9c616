// How far apart two words are, for a typo's "did you mean" (commands, option and field names).

/** Damerau-Levenshtein (optimal string alignment): insertions, deletions, substitutions, swaps of neighbours. */
export function editDistance(a: string, b: string): number {
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

/** The name a word probably meant: the same name in another case, else one at most two edits away. */
export function nameMeant(word: string, names: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  return (
    names.find((name) => name.toLowerCase() === lower) ??
    names.find((name) => editDistance(lower, name.toLowerCase()) <= 2)
  );
}
