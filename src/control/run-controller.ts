// Placeholder: how the Control Plane starts and steers runs through the engine (run-engine issue).
export interface RunController {
  close(): Promise<void>;
}
import type { ControlDeps } from './deps.ts';
export function createRunController(_deps: ControlDeps): RunController {
  return { async close() {} };
}
