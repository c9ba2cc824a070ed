import type { ToolContext } from '../../kit/define.ts';
import type { GitHubSettings } from './github/api.ts';
import type { GitSettings } from './run.ts';

/** What git_tools take beyond every tool's context: git's limits and environment, and the GitHub API's settings. */
export interface GitToolContext extends ToolContext {
  /** git_tools' timeout, output cap and the environment git starts from; defaults when absent. */
  git?: GitSettings;
  /** get_github_pull_request_info's API URL, optional token and timeout; api.github.com, no token when absent. */
  github?: GitHubSettings;
}
