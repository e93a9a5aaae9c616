// Lists functions over 80 lines and files over 300 lines in a tree (default src/): where to look for
// a module doing more than one job (STYLE.md: small modules, one job each). A report read by eye,
// not a rule: a longer function or file may be right, with its reason written down.

import fs from "node:fs";
import path from "node:path";
import ts from "typescript";

const files: string[] = [];
const walk = (d: string) => {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (p.endsWith(".ts")) files.push(p);
  }
};
walk(process.argv[2] ?? "src");
const out: string[] = [];
for (const f of files) {
  const src = ts.createSourceFile(f, fs.readFileSync(f, "utf8"), ts.ScriptTarget.Latest, true);
  const lines = src.getLineStarts().length;
  if (lines > 300) out.push(`FILE ${lines} ${f}`);
  const visit = (n: ts.Node) => {
    if (
      ts.isFunctionDeclaration(n) ||
      ts.isMethodDeclaration(n) ||
      ts.isArrowFunction(n) ||
      ts.isFunctionExpression(n) ||
      ts.isConstructorDeclaration(n)
    ) {
      const a = src.getLineAndCharacterOfPosition(n.getStart()).line;
      const b = src.getLineAndCharacterOfPosition(n.getEnd()).line;
      if (b - a > 80) out.push(`FN ${b - a} ${f}:${a + 1} ${(n as ts.FunctionDeclaration).name?.getText() ?? ""}`);
    }
    ts.forEachChild(n, visit);
  };
  visit(src);
}
console.log(out.sort().join("\n"));
