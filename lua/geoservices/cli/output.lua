--- What the command prints: one JSON object per line (`--json`), plain
-- lines, or (on a terminal) lines redrawn in place; the exit codes; progress
-- bars. Every command writes through an Out, whose standard output and
-- error pass every write through the one scrubber (geoservices.redact):
-- no registered secret, in any encoding, reaches a line, a `--json` event,
-- a dry run or a log line, whatever a server reflected.
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local redact = require "geoservices.base.redact"

local output = {}

--- Exit codes of the command (also `geoservices.cli.EXIT`): 130 is what a
-- shell reports for a command stopped by Ctrl-C (128 + SIGINT).
output.EXIT = { ok = 0, failed = 1, usage = 2, partial = 3, interrupted = 130 }
local EXIT = output.EXIT

-- ANSI colours of the terminal display.
local COLORS = { red = "31", green = "32", yellow = "33", dim = "2", bold = "1" }

--- Whether colours are used on a stream: only on a terminal, never with
-- `--no-color` or a non-empty NO_COLOR (https://no-color.org).
function output.use_color(args, env, is_tty)
  if args.no_color or not is_tty then return false end
  local no_color = env.getenv and env.getenv("NO_COLOR")
  return not (no_color and no_color ~= "")
end

--- The error a dry run's observer answers every request with: nothing is
-- sent, and the commands do not report it as a failure.
output.DRY_RUN = errors.new("dry_run", "dry run: nothing sent")
local DRY_RUN = output.DRY_RUN

local Out = {}
Out.__index = Out

-- A stream whose writes are scrubbed: each call's pieces are joined first,
-- so a secret split across them is still found.
local function scrubbed(stream)
  return {
    write = function(_, ...)
      local ok, err = stream:write(redact.text(table.concat({ ... })))
      if not ok then return ok, err end
      return _
    end,
    flush = function() return stream:flush() end,
    close = function() return stream:close() end,
  }
end

--- The command's output for parsed `args` on `env`'s streams (`stdout`,
-- `stderr`, `tty`, `stderr_tty`, `getenv`), every write scrubbed.
function output.new(args, env)
  local mode = args.json and "json" or (env.tty and "tty" or "lines")
  return setmetatable({ mode = mode, stdout = scrubbed(env.stdout), stderr = scrubbed(env.stderr),
                        verbose = args.verbose or 0, quiet = args.quiet or false,
                        live_shown = false, color = mode == "tty" and output.use_color(args, env, env.tty),
                        err_color = mode ~= "json" and output.use_color(args, env, env.stderr_tty),
                        running = nil }, Out)
end

--- `text` in a colour ("red", "green", "yellow", "dim", "bold") when this
-- output uses colours on standard output (`stream` "stderr": on standard error).
function Out:paint(text, color, stream)
  local on = stream == "stderr" and self.err_color or (stream ~= "stderr" and self.color)
  if not on or not COLORS[color] then return text end
  return "\27[" .. COLORS[color] .. "m" .. text .. "\27[0m"
end

--- Tells what keeps running on the server from now on, should the command
-- be interrupted: `{what = "the configuration", follow = "geoservices ... --attach",
-- verb = "follow it" (how the line introduces the command), resupply = what the
-- command needs given again}`; nil once it ended.
function Out:server_work(work)
  self.running = work
end

function Out:emit(event)
  self.stdout:write(json.encode(event), "\n")
  self.stdout:flush()
end

function Out:line(text)
  self:clear_live()
  self.stdout:write(text, "\n")
  self.stdout:flush()
end

--- A progress line (not data): on standard error, so that standard output
-- holds only what a script reads; nothing with `--quiet`.
function Out:progress(text)
  if self.quiet then return end
  self:clear_live()
  self.stderr:write(text, "\n")
  self.stderr:flush()
end

-- One line redrawn in place (terminal only; nothing with `--quiet`).
function Out:live(text)
  if self.quiet then return end
  self.stdout:write("\r\27[2K", text)
  self.stdout:flush()
  self.live_shown = true
end

function Out:clear_live()
  if self.live_shown then
    self.stdout:write("\r\27[2K")
    self.live_shown = false
  end
end

local function error_fields(err)
  if type(err) ~= "table" then return { kind = "failed", message = tostring(err) } end
  return { kind = err.kind, message = err.message, code = err.code, parameter = err.parameter,
           status = err.status, url = err.url }
end

-- Reports an error: a JSON event, or a line on standard error; then what
-- to do next when one action fits (`self.advise(err)`, set by main: see
-- geoservices.cli.hints), as the event's `hint` or a second line.
function Out:error(err, extra)
  local advice = self.advise and self.advise(err) or {}
  if self.mode == "json" then
    local ev = error_fields(err)
    ev.event = "error"
    ev.hint = advice.hint
    for k, v in pairs(extra or {}) do ev[k] = v end
    self:emit(ev)
  else
    self:clear_live()
    local where = extra and extra.replica and (extra.replica .. ": ") or ""
    local text = advice.message and (("%s: %s <%s>"):format(err.kind, advice.message, tostring(err.url)))
      or tostring(err)
    self.stderr:write(self:paint("geoservices:", "red", "stderr"), " ", where, text, "\n")
    if advice.hint and not self.quiet then
      self.stderr:write("  ", self:paint("hint:", "yellow", "stderr"), " ", advice.hint, "\n")
    end
    self.stderr:flush()
  end
end

function Out:result(code, fields)
  if self.mode == "json" then
    local ev = { event = "result", exit = code, ok = code == EXIT.ok }
    for k, v in pairs(fields or {}) do ev[k] = v end
    self:emit(ev)
  end
  return code
end

function output.exit_for(err)
  if type(err) == "table" and err.kind == "invalid" then return EXIT.usage end
  return EXIT.failed
end

-- Reports a failure and returns its exit code; a dry run's captured request
-- is not a failure (nil: main prints the request).
function output.fail(out, err, extra)
  if err == DRY_RUN then return nil end
  out:error(err, extra)
  return out:result(output.exit_for(err), { command = extra and extra.command })
end

function output.usage_error(out, message)
  return output.fail(out, errors.new("invalid", message))
end


output.SPINNER = { "|", "/", "-", "\\" }

-- A text on one line: a backslash and every control character escaped
-- (\n, \r, \t, \ddd), so a record a server or a colleague named with a
-- newline stays one line of a list (issue 39).
local ESCAPES = { ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ["\\"] = "\\\\" }
function output.one_line(text)
  return (tostring(text):gsub("[%c\\]", function(c) return ESCAPES[c] or ("\\%03d"):format(c:byte()) end))
end

--- A text value on one line, in double quotes (a quote escaped too).
function output.quoted(text)
  return '"' .. output.one_line(text):gsub('"', '\\"') .. '"'
end

function output.human_bytes(n)
  if n < 1024 then return ("%d B"):format(n) end
  if n < 1024 * 1024 then return ("%.1f KiB"):format(n / 1024) end
  return ("%.1f MiB"):format(n / (1024 * 1024))
end

--- A progress bar of a download: `[#####.....] 52% 1.2 MiB, 3400 records`
-- when the total size is known, a moving marker otherwise.
-- @tparam number bytes bytes received so far
-- @tparam[opt] number total expected bytes, when known
-- @tparam[opt] integer records records parsed so far
-- @tparam[opt] integer tick a counter that moves the marker when the total is unknown
-- @tparam[opt] integer width of the bar in characters (20)
-- @tparam[opt] boolean with_total show the size too when it is known: `52% 1.2 MiB of 2.3 MiB`
-- @treturn string the bar
-- @raise never
function output.progress_bar(bytes, total, records, tick, width, with_total)
  width = width or 20
  local bar
  if total and total > 0 then
    local filled = math.min(width, math.floor(width * bytes / total + 0.5))
    bar = ("[%s%s] %3d%%"):format(("#"):rep(filled), ("."):rep(width - filled), math.floor(100 * bytes / total))
  else
    local pos = (tick or 0) % width
    bar = ("[%s<=>%s]"):format((" "):rep(pos), (" "):rep(width - pos))
  end
  local text = ("%s %s"):format(bar, output.human_bytes(bytes))
  if with_total and total and total > 0 then text = text .. " of " .. output.human_bytes(total) end
  if records then text = text .. (", %d records"):format(records) end
  return text
end


local MARK = { not_started = " ", in_progress = ">", completed = "x", not_applicable = "-" }
local STAGE_COLOR = { in_progress = "yellow", completed = "green", not_applicable = "dim" }

--- One line of a configuration stage: `  [x] Relational store   completed`
-- (coloured by its state when `out` uses colours).
function output.stage_line(stage, out)
  local state = type(stage.state) == "string" and stage.state:lower() or "?"
  local line = ("  [%s] %-32s %s"):format(MARK[state] or "!", tostring(stage.name), tostring(stage.state))
  if out then line = out:paint(line, STAGE_COLOR[state] or (not MARK[state] and "red" or nil)) end
  return line
end

return output
