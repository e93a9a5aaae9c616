// The loader hooks of module-trace.mjs (they run on the loader's own thread).
import fs from "node:fs";

let file;

export function initialize(data) {
  file = data.file;
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (resolved.url.startsWith("file:")) fs.appendFileSync(file, `esm ${resolved.url}\n`);
  return resolved;
}
