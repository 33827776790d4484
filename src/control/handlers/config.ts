// Placeholder handlers: replaced by the issue that owns them.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';

export const getConfig: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const putConfig: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
