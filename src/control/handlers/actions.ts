// Placeholder handlers: replaced by the issue that owns them.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';

export const startRun: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const stopRun: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const resumeRun: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const retryRun: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const verifyRun: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const answerRun: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
