// Placeholder handlers: replaced by the issue that owns them.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';

export const getReviewRisk: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
