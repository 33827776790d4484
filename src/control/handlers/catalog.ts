// Placeholder handlers: replaced by the issue that owns them.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';

export const listProviders: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const listIntegrations: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const listNotifications: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const getKeys: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
export const listRepos: Handler<ControlDeps> = () => { throw new HttpError('unavailable', 'Not implemented yet'); };
