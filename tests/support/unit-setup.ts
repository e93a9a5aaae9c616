// The unit project's global set-up: no engine, only a temp folder of its own (see test-tmp.ts).
import { useTestTmp } from "./test-tmp.js";

export default function setup(): () => void {
  return useTestTmp();
}
