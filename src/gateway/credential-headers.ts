// The one list of request headers that carry credentials. The planner uses it to tell a
// credential header in models.json from an ordinary one; the gateway drops whatever the sandbox
// sends under these names (it holds a placeholder at best) before it adds the real ones, and
// keeps them out of every record.

const CREDENTIAL_HEADER_NAMES: readonly string[] = Object.freeze([
  "authorization",
  "proxy-authorization",
  "x-api-key",
  "api-key",
  "x-goog-api-key",
  "cf-aig-authorization",
  "cookie",
]);

export function isCredentialHeader(name: string): boolean {
  return CREDENTIAL_HEADER_NAMES.includes(name.toLowerCase());
}
