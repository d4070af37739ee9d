--- `geoservices completion bash|zsh|fish`: prints the shell completion
-- script (argparse's, the same `--completion SHELL` prints), as gh and
-- kubectl do, so a shell can load it from the command itself:
-- `source <(geoservices completion bash)`. Needs no server.
local output = require "geoservices.cli.output"

local completion = {
  help = "Print the shell completion script of geoservices for bash, zsh or fish.",
  exits = "0 printed, 2 bad usage (another shell)",
  examples = {
    "geoservices completion bash > ~/.local/share/bash-completion/completions/geoservices",
    "geoservices completion zsh > ~/.zfunc/_geoservices",
    "geoservices completion fish > ~/.config/fish/completions/geoservices.fish",
  },
  client = false, -- runs without a server
}

function completion.define(command)
  command:argument("shell", "The shell."):choices{ "bash", "zsh", "fish" }
end

-- parser: the command line's own (geoservices.cli hands it to every command).
function completion.run(args, out, _, _, parser)
  local script = parser["get_" .. args.shell .. "_complete"](parser)
  out.stdout:write(script)
  out.stdout:flush()
  return output.EXIT.ok
end

return completion
