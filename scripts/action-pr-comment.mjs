// The GitHub Action's optional pull-request comment (input comment-on-pr): posts the run's
// Markdown summary (`sandbox-run show --format md`, whose record text is all inside code spans and
// fences) on the pull request the workflow runs for. Needs a token with `pull-requests: write`;
// when there is no pull request, or the token may not comment (a fork's pull request gets a
// read-only token), it says so as a warning and the step still passes: a comment is a courtesy,
// the job summary and the artifact are the record.
//
// Usage: node action-pr-comment.mjs <summary.md>, with GH_TOKEN, GITHUB_EVENT_PATH,
// GITHUB_REPOSITORY and GITHUB_API_URL (the runner sets all but the token).
import fs from "node:fs";

const MAX_BODY = 65_000; // GitHub refuses comments over 65,536 characters

function warn(message) {
  // One line, no "::" of ours but the command itself: the message is built here, not from the record.
  process.stdout.write(`::warning::sandbox-run: ${message.replace(/[\r\n]+/g, " ")}\n`);
}

function pullRequestNumber() {
  try {
    const payload = JSON.parse(fs.readFileSync(process.env.GITHUB_EVENT_PATH ?? "", "utf8"));
    const number = payload.pull_request?.number ?? (payload.issue?.pull_request ? payload.issue.number : undefined);
    return Number.isInteger(number) ? number : undefined;
  } catch {
    return undefined;
  }
}

const [summaryFile] = process.argv.slice(2);
const repository = process.env.GITHUB_REPOSITORY ?? "";
const token = process.env.GH_TOKEN ?? "";
const number = pullRequestNumber();
if (number === undefined) {
  process.stdout.write("sandbox-run: not running for a pull request; no comment posted\n");
  process.exit(0);
}
if (!/^[\w.-]+\/[\w.-]+$/.test(repository) || token === "") {
  warn("cannot comment on the pull request: GITHUB_REPOSITORY or the token (input github-token) is missing");
  process.exit(0);
}
let body = fs.readFileSync(summaryFile, "utf8");
if (body.length > MAX_BODY) body = `${body.slice(0, MAX_BODY)}\n\n_(cut: see the job summary)_\n`;
const api = (process.env.GITHUB_API_URL ?? "https://api.github.com").replace(/\/+$/, "");
try {
  const response = await fetch(`${api}/repos/${repository}/issues/${number}/comments`, {
    method: "POST",
    headers: {
      accept: "application/vnd.github+json",
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "x-github-api-version": "2022-11-28",
      "user-agent": "sandbox-run-action",
    },
    body: JSON.stringify({ body }),
    signal: AbortSignal.timeout(30_000),
  });
  if (response.ok) {
    const posted = await response.json().catch(() => ({}));
    process.stdout.write(
      `sandbox-run: commented on pull request #${number}${posted.html_url ? `: ${posted.html_url}` : ""}\n`,
    );
  } else {
    warn(
      `could not comment on pull request #${number} (HTTP ${response.status}); the job needs "permissions: pull-requests: write" (a fork's pull request gets a read-only token)`,
    );
  }
} catch (error) {
  warn(`could not comment on pull request #${number}: ${error?.cause?.code ?? error?.message ?? error}`);
}
