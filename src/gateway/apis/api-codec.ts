// One provider-neutral view of the requests Pi sends and the replies the model gives, per Pi
// `api`. The gateway uses it to police requests (pin the model, refuse server-side tools and
// unknown betas), to take the run's result from what the model actually answered (never from
// Pi's stdout, which code in the sandbox can forge), and replay uses it to compare a
// conversation with a recorded one. Every shape is taken from Pi 1.6.0's own provider code
// (@earendil-works/pi-ai dist/api/*.js); where a codec departs from it, the module says so.
import { anthropicMessagesCodec } from "./anthropic-messages.js";
import { googleGenerativeAiCodec } from "./google-generative-ai.js";
import { mistralConversationsCodec } from "./mistral-conversations.js";
import { openAiCompletionsCodec } from "./openai-completions.js";
import { openAiResponsesCodec } from "./openai-responses.js";

export type * from "./codec-types.js";

import type { ApiCodec } from "./codec-types.js";

const CODECS: Record<string, ApiCodec> = {
  "openai-completions": openAiCompletionsCodec,
  "openai-responses": openAiResponsesCodec,
  "anthropic-messages": anthropicMessagesCodec,
  "mistral-conversations": mistralConversationsCodec,
  "google-generative-ai": googleGenerativeAiCodec,
};

/** The codec for a Pi `api`, or undefined for an api the gateway cannot read. */
export function codecFor(api: string): ApiCodec | undefined {
  return Object.hasOwn(CODECS, api) ? CODECS[api] : undefined;
}
