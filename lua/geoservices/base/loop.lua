--- The coroutine scheduler: many operations on one thread, a host loop
-- driving the library, cancellation and deadlines.
--
-- A task is a coroutine managed by a scheduler. When an operation inside a
-- task waits (a request in flight, a poll interval, another task), the
-- transport calls loop.await / loop.sleep, which yield the private sentinel
-- WAIT (cqueues' _POLL) to the scheduler; any other value a task yields is a
-- user yield and never mistaken for ours. Outside a task the same calls
-- simply block. The C core never yields: yields happen here, between calls
-- into the driver.
--
-- Drivers. Every client keeps its own driver (its own multi handle, so its
-- connection limits and keep-alive connections stay its own). A scheduler has
-- no driver of its own: it drives exactly the drivers its tasks are waiting
-- on, all of them through the socket-level API (driver:fds() /
-- :action(fd, events) / :action_timeout()), so one poll(2) covers any number
-- of clients and a host loop (luv, an editor, a game engine) can take the
-- poll's place: see Scheduler:fds(), :timeout(), :action(), :action_timeout().
-- A request whose driver is driven by someone else (a blocking call on the
-- same client) is still noticed: completion is read from the request's
-- state, never only from the list a driver call returns.
--
--     local a, b = geoservices.gather{
--       function() return c1:get_services_by_id{ id } end,
--       function() return c2:list_snapshots("nb-1") end,
--     }
--
-- The geoservices module exports run, spawn, sleep, gather, wrap, scheduler
-- and with_timeout. Operations inside a task return `nil, err` with kind
-- "cancelled" once the task is cancelled and kind "timeout" once a deadline
-- passed; an error raised inside a task becomes an error of kind "task".
--
-- A concurrent batch, and the same by hand:
--
--     local values, errs = geoservices.gather{
--       function() return client:sync("crew-1.json", nil, { timeout = 600 }) end,
--       function() return client:sync("crew-2.json", nil, { timeout = 600 }) end,
--     }
--     geoservices.run(function()
--       local sync = geoservices.spawn(client.sync, client, "crew-1.json")
--       local services = client:get_services_by_id{ "4d6f..." } -- runs while the sync does
--       geoservices.sleep(0.5)                                  -- yields, never blocks the others
--       if too_late then sync:cancel() end
--       local result, err = sync:join()                         -- err.kind "cancelled" if cancelled
--     end)
--
-- Errors stay in their task: a task that raises does not stop the others;
-- its join() returns `nil, err` with kind "task" (`err.value` is what was
-- raised, `err.traceback` where). Cancel aborts the request in flight (its
-- connection closed), ends a sleep or a join, and makes every later wait of
-- the task fail at once, so job polling and configure's stage polling stop;
-- a replica's state is untouched (client:sync writes it only after a whole
-- result). An operation's `opts.timeout` (and with_timeout) becomes one
-- absolute deadline: every request below it gets `deadline - now` as its
-- timeout and no poll interval sleeps past it; spawned tasks inherit it.
-- The client option `max_host_connections` caps the connections to one
-- host; further requests queue inside libcurl. Your own coroutines work
-- inside tasks (the scheduler's yields carry a private sentinel); inside a
-- plain coroutine operations block, and geoservices.wrap lets them yield.
--
-- A host event loop (luv, an editor, a game engine) runs tasks on a
-- scheduler and lets its own loop wait: `sched:fds()` lists the sockets to
-- watch (`{fd =, events = "r"|"w"|"rw", id =}`; a new id for the same fd is a
-- new socket), `sched:timeout()` says when to call `sched:action_timeout()`,
-- and `sched:action(fd, events)` is called when a socket is ready; none of
-- them blocks. `sched:step(0)` on every turn of the host loop is the simple
-- alternative. examples/luv_embed.lua is a whole luv program (its test
-- keeps a 10 ms luv timer's largest gap under 100 ms while ten syncs run).
--
-- One file, kept whole (about 900 lines, a third of them these notes and
-- the reference): tasks, the scheduler, deadlines and the waits are one
-- mechanism around private state that nothing else may touch: the WAIT
-- sentinel every scheduler yield carries, the weak table of managed
-- coroutines, the task context a deadline lives in. Split into modules,
-- that state would become fields of a module table, open to any caller
-- (and to monkey-patching); the public reference (geoservices.loop, with
-- Task and Scheduler) would also be cut in pieces. The C side is
-- csrc/net/driver.c (one driver) and drive.c (many in one poll).
-- @module geoservices.loop
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"

local loop = {}

local pack, unpack = table.pack, table.unpack
local now = core.monotonic
local isyieldable = coroutine.isyieldable

local MAX_WAIT_MS = 1000 -- a blocking poll never sleeps longer than this
local BLOCKING_WAIT_MS = 100
-- A blocking wait goes back to Lua this often (the transport's too).
loop.BLOCKING_WAIT_MS = BLOCKING_WAIT_MS

-- The private sentinel: the first value of every yield the scheduler owns.
local WAIT = setmetatable({}, {
  __name = "geoservices.loop.WAIT",
  __tostring = function() return "geoservices.loop.WAIT" end,
})

-- coroutine -> task, for the task coroutines and the geoservices.wrap
-- coroutines they resume (weak: an abandoned coroutine is not kept alive).
local managed = setmetatable({}, { __mode = "k" })

-- A blocking wait on a driver that a task's request is attached to (added
-- for the socket API: driver:add(req, true), until it finished or was
-- removed) must drive it the way the scheduler does, through the socket
-- level; on any other driver it uses the cheaper perform()/wait()/step().
-- The driver keeps that count itself (driver:socket_driven()), from the add
-- on: a finalizer may run a blocking request between a task's add and its
-- wait, or between two waits of a streaming request.

-- The context of code running outside any task (only its deadline).
local main_ctx = {}

--- The task running the current coroutine, or nil outside any task. Code
-- that cannot yield (a finalizer or a metamethod called from C inside a
-- task) counts as outside: its waits block, as in a plain coroutine.
local function current()
  if not isyieldable() then return nil end
  return managed[coroutine.running()]
end
loop.current = current

local function context()
  return current() or main_ctx
end

--- Deadlines.
-- A deadline is absolute, in seconds of the core's monotonic clock; it caps
-- every request's timeout and every sleep made while it is in effect.
-- @section deadlines

--- The absolute deadline (core.monotonic() seconds) in effect here, or nil.
-- @treturn ?number the deadline
-- @raise never
function loop.deadline()
  return context().deadline
end

--- The cancellation error of the current task once it was cancelled, else nil.
-- @treturn ?table the error (kind "cancelled"), or nil (also outside any task)
-- @raise never
function loop.cancelled()
  local task = current()
  return task and task.cancelled or nil
end

-- loop.cancelled() and loop.deadline() in one look-up of the current task
-- (the transport asks both before every request), then whether a request on
-- `driver` may be waited for by driving it alone (see loop.await): outside
-- any task, when no task's request is attached to that driver. When not,
-- the transport adds it for the socket API (driver:add(req, true)).
function loop.limits(driver)
  local task = current()
  if task then return task.cancelled, task.deadline, false end
  return nil, main_ctx.deadline, not driver:socket_driven()
end

--- Runs fn(...) with `deadline` (absolute, core.monotonic() seconds) in
-- effect: every request made meanwhile times out by then, sleeps are cut
-- short. A deadline only ever shrinks: an enclosing earlier one wins.
-- @number deadline absolute, core.monotonic() seconds
-- @func fn the function
-- @param ... its arguments
-- @return what fn returns
-- @raise what fn raises
function loop.with_deadline(deadline, fn, ...)
  local _ <close> = loop.deadline_scope(deadline)
  return fn(...)
end

--- The same as a to-be-closed value: `local _ <close> = loop.deadline_scope(t)`
-- keeps deadline `t` in effect until the end of the enclosing block. An
-- operation's opts.timeout becomes one such deadline (nil: none).
-- @tparam ?number deadline absolute, core.monotonic() seconds, or nil
-- @treturn ?table a to-be-closed value that restores the previous deadline (nil when deadline is nil)
-- @raise never for a number or nil
function loop.deadline_scope(deadline)
  if deadline == nil then return nil end
  local ctx = context()
  local saved = ctx.deadline
  if saved == nil or deadline < saved then ctx.deadline = deadline end
  return setmetatable({}, { __close = function() ctx.deadline = saved end })
end

--- loop.with_deadline with a relative timeout in seconds
-- (`geoservices.with_timeout(seconds, fn, ...)`): one deadline for every
-- operation inside fn, which then return `nil, err` of kind "timeout".
-- @number seconds the time allowed
-- @func fn the function
-- @param ... its arguments
-- @return what fn returns
-- @raise when seconds is not a number; what fn raises
function loop.with_timeout(seconds, fn, ...)
  if type(seconds) ~= "number" then error("with_timeout: seconds must be a number", 2) end
  return loop.with_deadline(now() + seconds, fn, ...)
end

local function cancelled_error(reason)
  return errors.new("cancelled", reason or "task cancelled")
end

-- Tasks ---------------------------------------------------------------------

local Task = { __name = "geoservices.Task" }
Task.__index = Task

local next_task_id = 0

--- A task handle, returned by spawn (`geoservices.spawn`, `scheduler:spawn`).
-- `tostring(task)` shows its id and state.
-- @type Task

-- One line: id, state, cancelled.
function Task:__tostring()
  return ("geoservices.Task #%d (%s%s)"):format(self.id, self.state, self.cancelled and ", cancelled" or "")
end

--- Cancels the task: a request in flight is removed from its multi handle
-- (its connection closed), a sleep or a join ends, and every later wait in
-- the task fails at once, so polling loops stop. The task's result is then
-- nil, err with err.kind == "cancelled". Returns false if it had finished.
-- @string[opt="task cancelled"] reason the message of the cancellation error
-- @treturn boolean true if the task was (or already is) cancelled, false if it had finished
-- @raise never
function Task:cancel(reason)
  if self.state == "done" then return false end
  if self.cancelled then return true end
  self.cancelled = cancelled_error(reason)
  if self.state == "waiting" then
    self.sched:_unwait(self)
    self.sched:_enqueue(self, nil, self.cancelled.message, "cancelled")
  end
  -- "ready" tasks see the flag when resumed; a task never started is not run.
  return true
end

--- Waits for the task and returns its results, or nil, err (the error the
-- task raised, as an error table of kind "task" unless it raised an error
-- table; or kind "cancelled"). Inside a task of the same scheduler this
-- yields; outside any task it drives the scheduler until the task ends.
-- @return[1] the task's results
-- @return[2] nil
-- @treturn[2] table err: kind "task" (it raised: `err.value`, `err.traceback`), "cancelled", or the
--   error table it raised
-- @raise when a task joins itself, or a task of another scheduler
function Task:join()
  if self.state ~= "done" then
    local task = current()
    if task == self then error("a task cannot join itself", 2) end
    if task and task.sched == self.sched then
      if task.cancelled then return nil, task.cancelled end
      local ok = coroutine.yield(WAIT, "join", self)
      if not ok then return nil, task.cancelled or cancelled_error() end
    elseif task then
      error("join: the task belongs to another scheduler", 2)
    else
      self.sched:loop(function() return self.state == "done" end)
    end
  end
  if self.err then return nil, self.err end
  return unpack(self.results, 1, self.results.n)
end

--- The task's state.
-- @treturn string "ready", "running", "waiting" or "done"
-- @raise never
function Task:status()
  return self.state
end

-- Schedulers ------------------------------------------------------------------

--- Schedulers.
-- A scheduler runs tasks; geoservices.run makes one per call. A host loop
-- (luv, an editor, a game engine) makes its own and drives it.
-- @section schedulers

local Scheduler = { __name = "geoservices.Scheduler" }
Scheduler.__index = Scheduler

--- A new scheduler. geoservices.run makes one per call; a host loop makes
-- one with geoservices.scheduler() and drives it with step() or with the
-- socket-level methods.
-- @treturn Scheduler the scheduler (`geoservices.scheduler()`)
-- @raise never
function loop.scheduler()
  return setmetatable({
    tasks = {},       -- unfinished task -> true
    ntasks = 0,
    ready = {},       -- queue of { task, packed resume arguments }
    timers = {},      -- sleeping task -> wake-up time
    waiting = {},     -- driver -> { [request] = task }
    fd_owner = {},    -- fd -> driver, from the last fds()
  }, Scheduler)
end

--- A scheduler made by @{scheduler}. A host loop watches @{Scheduler:fds}
-- and @{Scheduler:timeout}, and calls @{Scheduler:action} and
-- @{Scheduler:action_timeout}; or it calls @{Scheduler:step} now and then.
-- @type Scheduler

-- One line: the number of tasks.
function Scheduler:__tostring()
  return ("geoservices.Scheduler (%d tasks)"):format(self.ntasks)
end

-- The ready queue holds pairs: a task, then the values its resume passes
-- (shared constants for the usual "true" and nothing, so a wake-up
-- allocates nothing).
local RESUME_TRUE = { n = 1, true }
local RESUME_NONE = { n = 0 }

function Scheduler:_enqueue(task, ...)
  task.state = "ready"
  local queue = self.ready
  local n = #queue
  queue[n + 1] = task
  local count = select("#", ...)
  if count == 0 then
    queue[n + 2] = RESUME_NONE
  elseif count == 1 and (...) == true then
    queue[n + 2] = RESUME_TRUE
  else
    queue[n + 2] = pack(...)
  end
end

--- Starts fn(...) as a task of this scheduler; returns its handle. The task
-- inherits the deadline in effect where it is spawned. It first runs on the
-- scheduler's next turn.
-- @func fn the task's function
-- @param ... its arguments
-- @treturn Task the task's handle
-- @raise when fn is not a function
function Scheduler:spawn(fn, ...)
  if type(fn) ~= "function" then error("spawn: expected a function", 2) end
  next_task_id = next_task_id + 1
  local task = setmetatable({
    id = next_task_id, sched = self, co = coroutine.create(fn), state = "ready",
    deadline = loop.deadline(), waiters = {},
  }, Task)
  managed[task.co] = task
  self.tasks[task] = true
  self.ntasks = self.ntasks + 1
  self:_enqueue(task, ...)
  return task
end

function Scheduler:_finish(task, results, err)
  task.state = "done"
  managed[task.co] = nil
  self.tasks[task] = nil
  self.ntasks = self.ntasks - 1
  if task.cancelled then
    task.err = task.cancelled
  elseif err then
    task.err = err
  else
    task.results = results
  end
  for _, waiter in ipairs(task.waiters) do
    if waiter.state == "waiting" and waiter.wait == "join" then
      waiter.wait = nil
      self:_enqueue(waiter, true)
    end
  end
  task.waiters = {}
end

-- What a waiting task waits on: task.wait is "request" (task.wait_driver,
-- task.wait_req), "sleep" or "join"; nil when it waits on nothing.

-- Takes a task out of whatever it waits on (for cancel).
function Scheduler:_unwait(task)
  local wait, driver, req = task.wait, task.wait_driver, task.wait_req
  task.wait, task.wait_driver, task.wait_req = nil, nil, nil
  if not wait then return end
  if wait == "request" then
    local set = self.waiting[driver]
    if set and set[req] then
      set[req] = nil
      if next(set) == nil then self.waiting[driver] = nil end
    end
  elseif wait == "sleep" then
    self.timers[task] = nil
  end -- a join: _finish skips waiters that no longer wait
end

function Scheduler:_wait(task, kind, a, b)
  task.state = "waiting"
  if kind == "request" then
    local set = self.waiting[a]
    if not set then -- the last set emptied is kept for this: one request after another allocates none
      set = self.spare_set or {}
      self.spare_set = nil
      self.waiting[a] = set
    end
    set[b] = task
    task.wait, task.wait_driver, task.wait_req = "request", a, b
    -- finished already: a blocking request since the add (in a finalizer)
    -- drove the driver; core.drive would not notice, and wait its full time
    if b:ready() then self:_sweep(a) end
  elseif kind == "sleep" then
    self.timers[task] = a
    self.sleep_seq = (self.sleep_seq or 0) + 1
    task.sleep_seq = self.sleep_seq
    task.wait = "sleep"
  elseif kind == "join" then
    if a.state == "done" then
      self:_enqueue(task, true)
    else
      a.waiters[#a.waiters + 1] = task
      task.wait = "join"
    end
  else -- "yield": let the others run, then continue
    self:_enqueue(task, true)
  end
end

function Scheduler:_resume(task, args)
  if task.cancelled and not task.started then -- cancelled before it ever ran
    coroutine.close(task.co)
    self:_finish(task)
    return
  end
  task.started = true
  task.state = "running"
  if args.n == 1 then return self:_resumed(task, coroutine.resume(task.co, args[1])) end
  return self:_resumed(task, coroutine.resume(task.co, unpack(args, 1, args.n)))
end

-- What a resume returned, taken as arguments (no table for the usual yield).
function Scheduler:_resumed(task, ok, first, ...)
  -- the usual: a wait of ours (a task never returns the sentinel: only
  -- this module has it)
  if first == WAIT and ok then return self:_wait(task, ...) end
  if not ok then
    local e = first
    local trace = debug.traceback(task.co, tostring(e))
    coroutine.close(task.co) -- closes its pending <close> variables (requests)
    if not errors.is(e) then e = errors.new("task", tostring(e), { value = e, traceback = trace }) end
    task.raised = first
    self:_finish(task, nil, e)
  elseif coroutine.status(task.co) == "dead" then
    self:_finish(task, pack(first, ...))
  elseif self.passthrough and coroutine.isyieldable() then
    -- A user yield at the task's top level goes up to whoever resumed
    -- geoservices.run (multi-level, as in cqueues); what comes back goes
    -- back to the task.
    self:_enqueue(task, coroutine.yield(first, ...))
  else
    self:_enqueue(task) -- nobody to hand it to: a plain cooperative yield
  end
end

-- Resumes the tasks that are ready now (not those made ready meanwhile, so
-- a task that keeps yielding cannot starve the I/O). Two queues take turns,
-- so a wake-up allocates none.
function Scheduler:_run_ready()
  local queue = self.ready
  local n = #queue
  if n == 0 then return end
  self.ready = self.spare_ready or {}
  self.spare_ready = nil
  for i = 1, n, 2 do
    local task, args = queue[i], queue[i + 1]
    queue[i], queue[i + 1] = nil, nil
    if task.state == "ready" then
      if task.started and args == RESUME_TRUE then -- the usual wake-up: self:_resume(task, args), inline
        task.state = "running"
        self:_resumed(task, coroutine.resume(task.co, true))
      else
        self:_resume(task, args)
      end
    end
  end
  self.spare_ready = queue
end

-- Wakes the tasks whose request is no longer running, or has streamed
-- records for its task to take.
function Scheduler:_sweep(driver)
  local set = self.waiting[driver]
  if not set then return end
  for req, task in pairs(set) do
    if req:ready() then
      set[req] = nil
      task.wait, task.wait_driver, task.wait_req = nil, nil, nil
      -- self:_enqueue(task, true), inline: once per request
      task.state = "ready"
      local queue = self.ready
      local n = #queue
      queue[n + 1], queue[n + 2] = task, RESUME_TRUE
    end
  end
  if next(set) == nil then
    self.waiting[driver] = nil
    self.spare_set = set
  end
end

-- A driver failed as a whole (closed, or a multi error): its waiters get it.
function Scheduler:_fail_driver(driver, msg, code)
  local set = self.waiting[driver]
  self.waiting[driver] = nil
  for _, task in pairs(set or {}) do
    task.wait, task.wait_driver, task.wait_req = nil, nil, nil
    self:_enqueue(task, nil, msg, code)
  end
end

-- Wakes the sleepers whose time has come, earliest first (ties: the one
-- that went to sleep first). A turn delayed by a loaded machine or a long
-- callback finds several due at once; in the timers' hash order a task that
-- asked for a shorter sleep could run after one that asked for a longer.
local function wakes_before(timers)
  return function(a, b)
    local x, y = timers[a], timers[b]
    if x ~= y then return x < y end
    return a.sleep_seq < b.sleep_seq
  end
end

function Scheduler:_wake_timers()
  local t, due, n = nil, nil, 0
  local timers = self.timers
  for task, at in pairs(timers) do
    t = t or now()
    if at <= t then
      due = due or self.spare_due or {}
      n = n + 1
      due[n] = task
    end
  end
  if n == 0 then return end
  self.spare_due = nil
  if n > 1 then table.sort(due, wakes_before(timers)) end
  for i = 1, n do
    local task = due[i]
    due[i] = nil
    timers[task] = nil
    task.wait = nil
    self:_enqueue(task, true)
  end
  self.spare_due = due
end

local function driver_usable(self, driver)
  if driver:closed() then
    self:_fail_driver(driver, "the client was closed while the request was in flight", "closed")
    return false
  end
  return true
end

--- Milliseconds until the scheduler needs action_timeout() (0: at once), or
-- nil when it only waits for its sockets (or has nothing to do).
-- @treturn ?integer milliseconds, or nil
-- @raise never
function Scheduler:timeout()
  if #self.ready > 0 then return 0 end
  local best
  for driver in pairs(self.waiting) do
    if driver_usable(self, driver) then
      local ms = driver:timeout()
      if ms and (best == nil or ms < best) then best = ms end
    else
      return 0
    end
  end
  if next(self.timers) then
    local t = now()
    for _, at in pairs(self.timers) do
      local ms = math.max(0, math.ceil((at - t) * 1000))
      if best == nil or ms < best then best = ms end
    end
  end
  return best
end

--- The sockets to watch, { {fd =, events = "r"|"w"|"rw", id =}, ... }: the
-- union over the drivers the tasks wait on. `id` changes when a socket
-- number is reused (see driver:fds()).
-- @treturn {table,...} the sockets
-- @raise never
function Scheduler:fds()
  local list, owner = {}, {}
  for driver in pairs(self.waiting) do
    if driver_usable(self, driver) then
      for _, w in ipairs((driver:fds())) do
        list[#list + 1] = w
        owner[w.fd] = driver
      end
    end
  end
  self.fd_owner = owner
  return list
end

-- After driving: wake finished requests and due timers, run what is ready.
function Scheduler:_after()
  for driver in pairs(self.waiting) do self:_sweep(driver) end
  if next(self.timers) then self:_wake_timers() end
  if self.ready[1] then self:_run_ready() end
end

local function drive(self, driver, fd, events)
  local running, msg, code
  if fd then running, msg, code = driver:action(fd, events)
  else running, msg, code = driver:action_timeout() end
  if not running then self:_fail_driver(driver, msg, code) end
end

--- The host loop saw `events` ("r", "w", "rw", optionally with "e") on `fd`,
-- one of fds(). Never blocks; resumes the tasks that can go on.
-- @int fd the socket
-- @string[opt="r"] events what happened ("r", "w", "rw", "e"; luv's letters are accepted)
-- @return nothing
-- @raise never (what a task raises is kept for its join)
function Scheduler:action(fd, events)
  -- host loops have more letters (luv: "d" disconnect, "p" priority)
  events = (events or "r"):gsub("d", "r"):gsub("[^rwe]", "")
  local driver = self.fd_owner[fd]
  if driver and not driver:closed() then drive(self, driver, fd, events) end
  self:_after()
end

--- The time timeout() asked for has passed. Never blocks.
-- @return nothing
-- @raise never
function Scheduler:action_timeout()
  for driver in pairs(self.waiting) do
    if driver_usable(self, driver) then
      local ms = driver:timeout()
      if ms and ms <= 0 then drive(self, driver) end
    end
  end
  self:_after()
end

-- Waits up to `cap_ms` for sockets or timers, drives the drivers, then
-- resumes the tasks that can go on. The socket work is core.drive's: one
-- poll(2) over every waited-on driver's sockets, their actions and due
-- timers, in C (the host-loop methods above do the same in steps).
function Scheduler:_wait_and_drive(cap_ms)
  local wait = cap_ms
  if #self.ready > 0 then
    wait = 0
  elseif next(self.timers) then
    local t = now()
    for _, at in pairs(self.timers) do
      local ms = math.max(0, math.ceil((at - t) * 1000))
      if ms < wait then wait = ms end
    end
  elseif next(self.waiting) == nil and self.ntasks > 0 then
    error("geoservices: deadlock: every task is waiting for another task", 0)
  end
  local ok, failures = core.drive(self.waiting, wait)
  if not ok then error("geoservices: poll failed: " .. tostring(failures), 0) end
  if failures then
    for i = 1, #failures, 3 do self:_fail_driver(failures[i], failures[i + 1], failures[i + 2]) end
  end
  self:_after()
end

--- One turn: runs the ready tasks, waits up to `timeout_ms` (default 0, so
-- a host can call step(0) from its own loop) for sockets or timers, drives
-- the drivers. Returns true while tasks remain.
-- @int[opt=0] timeout_ms the longest wait, in milliseconds
-- @treturn boolean true while tasks remain
-- @raise when every task waits for another (a deadlock) or poll(2) fails
function Scheduler:step(timeout_ms)
  self:_after()
  if self.ntasks == 0 then return false end
  self:_wait_and_drive(timeout_ms or 0)
  return self.ntasks > 0
end

--- Drives the scheduler (blocking) until `pred()` is true, or until no task
-- is left when pred is nil.
-- @func[opt] pred the condition
-- @return nothing
-- @raise when no task is left before pred is true, on a deadlock, or when poll(2) fails
function Scheduler:loop(pred)
  pred = pred or function() return self.ntasks == 0 end
  self:_after()
  while true do
    if pred() then return end
    if self.ntasks == 0 then error("geoservices: nothing left to run", 0) end
    self:_wait_and_drive(MAX_WAIT_MS) -- ends with _after
  end
end

--- True when no task is left.
-- @treturn boolean
-- @raise never
function Scheduler:done()
  return self.ntasks == 0
end

--- Cancels every unfinished task and lets them unwind (their waits fail at
-- once); a task that still does not finish has its coroutine closed, which
-- closes its pending <close> variables (the request in flight).
-- @return nothing
-- @raise never
function Scheduler:close()
  for task in pairs(self.tasks) do
    if task.state ~= "running" then task:cancel("scheduler closed") end
  end
  for _ = 1, 100 do
    if #self.ready == 0 then break end
    self:_run_ready()
  end
  for task in pairs(self.tasks) do
    if task.state ~= "running" then
      self:_unwait(task)
      coroutine.close(task.co)
      self:_finish(task)
    end
  end
end

-- Waiting, for the transport -----------------------------------------------------

--- Running and waiting.
-- @section running

--- Waits for `req` (already added to `driver`) to leave the "running" state.
-- Inside a task this yields to the scheduler; outside one it drives `driver`
-- alone until then: with step() (curl_multi_poll), or through the socket
-- level like the scheduler when a task's request is attached to this driver, since
-- libcurl's two ways of driving a multi handle must not interleave. Returns true, or nil,
-- message, code (code "cancelled" when the task was cancelled); the caller
-- removes the request on failure. `progress` (streaming) is called whenever
-- the body may have brought records, and once the request is no longer running.
-- Internal: the transport calls it.
-- @local
function loop.await(driver, req, progress)
  local task = current()
  if task then
    if task.cancelled then return nil, task.cancelled.message, "cancelled" end
    if not progress then return coroutine.yield(WAIT, "request", driver, req) end
    -- streaming: the scheduler also wakes us when records are ready (_sweep)
    while true do
      local ok, msg, code = coroutine.yield(WAIT, "request", driver, req)
      if not ok then return ok, msg, code end
      progress()
      if req:state() ~= "running" then return true end
    end
  end
  if not driver:socket_driven() then -- no task's transfer on it: libcurl's own poll
    if not progress then -- the whole wait in C, back here only every BLOCKING_WAIT_MS
      while true do
        local done, msg, code = driver:wait(req, BLOCKING_WAIT_MS)
        if done then return true end
        if done == nil then return nil, msg, code end
      end
    end
    while req:state() == "running" do
      -- drain first: it resumes a transfer paused for a full record tape,
      -- and libcurl's timeout is then 0 instead of a useless wait
      if progress then progress() end
      local ms = driver:timeout()
      if ms == nil or ms > BLOCKING_WAIT_MS then ms = BLOCKING_WAIT_MS end
      local running, msg, code = driver:step(ms)
      if not running then return nil, msg, code end
    end
    return true
  end
  while req:state() == "running" do
    if progress then progress() end
    local ms = driver:timeout()
    if ms == nil or ms > BLOCKING_WAIT_MS then ms = BLOCKING_WAIT_MS end
    local events, msg, code
    if ms > 0 then
      events, msg, code = core.poll((driver:fds()), ms)
      if not events then return nil, msg, code end
    end
    local running
    if events and #events > 0 then
      for _, ev in ipairs(events) do
        running, msg, code = driver:action(ev.fd, ev.events)
        if not running then return nil, msg, code end
      end
    else
      running, msg, code = driver:action_timeout()
      if not running then return nil, msg, code end
    end
  end
  return true
end

--- Sleeps `seconds`: inside a task it yields to the scheduler, outside it
-- blocks. Never sleeps past the current deadline: then returns nil, err
-- (kind "timeout"). Returns true, or nil, err (kind "cancelled").
-- (`geoservices.sleep(seconds)`)
-- @number seconds how long
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err: kind "timeout" (cut short by the deadline) or "cancelled"
-- @raise when seconds is not a number
function loop.sleep(seconds)
  if type(seconds) ~= "number" then error("sleep: seconds must be a number", 2) end
  local task = current()
  local at = now() + math.max(0, seconds)
  local deadline = loop.deadline()
  local cut = deadline and deadline < at
  if cut then at = deadline end
  if task then
    if task.cancelled then return nil, task.cancelled end
    local ok = coroutine.yield(WAIT, "sleep", at)
    if not ok then return nil, task.cancelled or cancelled_error() end
  else
    while true do
      local left = at - now()
      if left <= 0 then break end
      core.poll({}, math.max(1, math.ceil(left * 1000)))
    end
  end
  if cut then return nil, errors.new("timeout", "the deadline passed while sleeping") end
  return true
end

--- Lets the other tasks run once (no-op outside a task).
-- @return nothing
-- @raise never
function loop.yield()
  local task = current()
  if task then coroutine.yield(WAIT, "yield") end
end

-- The public functions ----------------------------------------------------

--- Starts a concurrent task in the current task's scheduler; returns its
-- handle (:join(), :cancel()). Raises outside a task (`geoservices.spawn(fn, ...)`).
-- @func fn the task's function
-- @param ... its arguments
-- @treturn Task the task's handle
-- @raise outside a task, or when fn is not a function
function loop.spawn(fn, ...)
  local task = current()
  if not task then
    error("geoservices.spawn: not inside a task (use geoservices.run, or a scheduler's :spawn)", 2)
  end
  return task.sched:spawn(fn, ...)
end

--- Runs fn(...) as a task and drives the core until it and every task it
-- spawned have finished; returns fn's results. An error raised by fn is
-- raised again here (after the other tasks were cancelled); errors of
-- spawned tasks are returned by their join(). Inside a task, run(fn, ...)
-- runs fn as a task of the same scheduler and waits for it (`geoservices.run(fn, ...)`).
-- @func fn the main function
-- @param ... its arguments
-- @return[1] what fn returns
-- @return[2] nil
-- @treturn[2] table err of kind "cancelled" when the main task was cancelled
-- @raise when fn is not a function; what fn raises; on a deadlock (every task waiting for another)
function loop.run(fn, ...)
  if type(fn) ~= "function" then error("geoservices.run: expected a function", 2) end
  local task = current()
  if task then
    local child = task.sched:spawn(fn, ...)
    local results = pack(child:join())
    if child.raised ~= nil then error(child.raised, 0) end
    return unpack(results, 1, results.n)
  end
  local sched = loop.scheduler()
  sched.passthrough = true
  local main = sched:spawn(fn, ...)
  local ok, err = pcall(sched.loop, sched, function()
    return sched.ntasks == 0 or (main.state == "done" and main.raised ~= nil)
  end)
  if not ok then
    sched:close()
    error(err, 0)
  end
  if main.raised ~= nil then
    sched:close()
    error(main.raised, 0)
  end
  if main.err then return nil, main.err end
  return unpack(main.results, 1, main.results.n)
end

--- Runs every function of `fns` concurrently and returns two lists in the
-- same order: values[i], the first result of fns[i] (nil if it failed), and
-- errs[i], its error (the second result when the first is nil, or what it
-- raised). values.n == #fns. Inside a task it joins; outside it runs
-- (`geoservices.gather(fns)`).
-- @tparam {func,...} fns the functions
-- @treturn table values, with `n`
-- @treturn table errs (kind "task" for what a function raised)
-- @raise when fns is not a table
function loop.gather(fns)
  if type(fns) ~= "table" then error("geoservices.gather: expected a list of functions", 2) end
  local function body()
    local handles = {}
    for i, fn in ipairs(fns) do handles[i] = loop.spawn(fn) end
    local values, errs = { n = #fns }, {}
    for i, h in ipairs(handles) do
      local value, err = h:join()
      values[i] = value
      if value == nil then errs[i] = err end
    end
    return values, errs
  end
  if current() then return body() end
  return loop.run(body)
end

--- Like coroutine.wrap, for a generator that itself calls operations: its
-- waits go up to the scheduler (so the other tasks keep running) while its
-- own yields come back to the caller. A plain coroutine also works inside a
-- task, but operations inside it block instead of yielding (`geoservices.wrap(fn)`).
-- @func fn the generator's body
-- @treturn function resumes the generator: returns what it yields or returns
-- @raise the returned function raises what the generator raises
function loop.wrap(fn)
  local co = coroutine.create(fn)
  return function(...)
    managed[co] = current()
    local res = pack(coroutine.resume(co, ...))
    while res[1] and res[2] == WAIT and coroutine.status(co) == "suspended" do
      res = pack(coroutine.resume(co, coroutine.yield(unpack(res, 2, res.n))))
    end
    if not res[1] then
      coroutine.close(co)
      error(res[2], 0)
    end
    return unpack(res, 2, res.n)
  end
end

loop.WAIT = nil -- the sentinel stays private
loop.Task = Task
loop.Scheduler = Scheduler
return loop
