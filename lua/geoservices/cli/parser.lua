--- The command line's grammar (lua-argparse): the options, the commands
-- and their help texts, each command's exit codes and examples.
local argparse = require "argparse"

local parser = {}

local EPILOG = [[
Environment: GEOSERVICES_URL (default of --url), GEOSERVICES_TOKEN (default token),
GEOSERVICES_PROFILE (default of --profile), GEOSERVICES_PASSWORD (password of --username),
ORG_ADMIN_PASSWORD and ORG_ADMIN_ANSWER (configure; see --password-env, --answer-env),
NO_COLOR (no colours). Profiles: $XDG_CONFIG_HOME/geoservices/config (see geoservices login --help).

Exit codes (each command's --help lists its own):
  0  success
  1  the operation failed (network, server, authentication, job failed)
  2  bad usage or invalid input (nothing was sent)
  3  partial: the synchronization succeeded but some edits failed; services: some ids not returned
  130  interrupted (Ctrl-C); the line printed says what still runs on the server]]

-- Each command's own exit codes, shown by its --help.
local COMMAND_EXITS = {
  sync = "0 every replica synchronized, 1 a synchronization failed, 2 bad usage, a store or state file that "
    .. "cannot be read (nothing sent), 3 partial (some edits failed), 130 interrupted (a job or edits that may "
    .. "have reached the server: run the same sync again to follow them)",
  configure = "0 the organization is ready (or, with --no-wait, the request was accepted), 1 configuration "
    .. "failed (a stage failed, the deadline passed, the server refused), 2 bad usage or invalid parameters "
    .. "(nothing sent), 130 interrupted (the configuration keeps running: follow it with --attach)",
  services = "0 every id was returned (--search: the matches, none included), 1 the request failed, 2 bad usage, "
    .. "3 some ids were not returned "
    .. "(they are named)",
  snapshots = "0 listed, 1 the request failed, 2 bad usage",
  status = "0 the state was read (ready, in progress or not configured), 1 the request failed or the "
    .. "organization's configuration failed, 2 bad usage; with STORE.gpkg: 0 shown, 1 the store cannot be read, "
    .. "2 no store that opens at the path",
  login = "0 the token was generated and stored, 1 generateToken refused (wrong password...) or the token "
    .. "could not be stored, 2 bad usage (no address, no username, no password to be had)",
  emulator = "0 stopped, 1 could not start, 2 bad usage, 130 interrupted (Ctrl-C; nothing keeps running)",
  replica = "0 done, 1 the request or the job failed, 2 bad usage, a store or state file that cannot be read, or "
    .. "a request the service cannot take (refused before anything was sent: a sync model or direction it does "
    .. "not support...), 3 partial (the createReplica job ended CompletedWithErrors), 130 interrupted (a "
    .. "createReplica job keeps running: follow it with replica resume)",
  ["replica create"] = "0 the replica was created and OUT written, 1 the request or the job failed, or OUT could "
    .. "not be written (the replica the server made is then unregistered, or the command that does it named), 2 "
    .. "bad usage or a request the service cannot take (nothing sent), 3 partial (the job ended "
    .. "CompletedWithErrors), 130 interrupted (a createReplica job keeps running: follow it with replica resume)",
  ["replica resume"] = "0 the replica was kept in OUT, or OUT is already complete (nothing to resume), 1 the job "
    .. "failed or is gone, 2 no job is journaled for OUT, 130 interrupted (run the same resume again)",
  ["replica info"] = "0 shown, 1 the request failed (the server does not know the replica...), 2 bad usage or a "
    .. "store or state file that cannot be read",
  ["replica unregister"] = "0 unregistered, 1 the request failed, 2 bad usage, a store or state file that cannot "
    .. "be read, a store holding local edits not sent, rejected edits or conflicts (without --force), '*' "
    .. "without --yes and no terminal (nothing sent)",
  ["replica failed"] = "0 listed (none included), 1 the store cannot be read, 2 bad usage or no store at the path",
}

-- Two or three real command lines per command, the last part of its --help
-- (spec/cli/messages_spec.lua parses every one; spec/cli/help_spec.lua runs
-- them against the emulator). The emulator's are its own program's.
local EXAMPLES = {
  [""] = {
    "geoservices --url http://127.0.0.1:8080/server --username admin login",
    "geoservices replica create Parcels --layers 0 --name crew-1 crew-1.gpkg",
    "geoservices sync crew-1.gpkg",
  },
  sync = {
    "geoservices sync crew-1.gpkg                    # upload its queued edits, download the changes",
    "geoservices --json sync crew-1.gpkg crew-2.gpkg # several stores, one JSON object per line",
    "geoservices sync crew-1.gpkg --async --wait-timeout 600",
  },
  configure = {
    "geoservices --dry-run configure org.json        # check the parameters, show the request, send nothing",
    "geoservices configure org.json --poll-interval 2",
    "geoservices --username siteadmin configure --attach   # follow a configuration already running",
  },
  services = {
    "geoservices services --search parcels        # find a service by name, with its id",
    "geoservices services 4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c",
    "geoservices --json services 4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c 7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b",
  },
  snapshots = {
    "geoservices snapshots nb-street-trees",
    "geoservices --json snapshots nb-street-trees",
  },
  status = {
    "geoservices status",
    "geoservices --json status",
  },
  login = {
    "geoservices --url https://gis.example.com/server --username alice login",
    "geoservices --profile prod login                # the profile's address and user",
    "geoservices --username alice --password-file alice.password login --expiration 480",
  },
  replica = {
    "geoservices replica create Parcels --layers 0,1 --name crew-2 crew-2.gpkg",
    "geoservices replica info crew-2.gpkg",
    "geoservices replica unregister crew-2.gpkg",
  },
  ["replica create"] = {
    "geoservices replica create Parcels --layers 0 --name crew-1 crew-1.gpkg",
    "geoservices replica create Parcels --layers 0,1 --geometry -117.2,34.0,-117.1,34.1 --in-sr 4326 east.gpkg",
    "geoservices --dry-run replica create Parcels --layers 0 --direction download check.gpkg",
  },
  ["replica resume"] = {
    "geoservices replica resume crew-1.gpkg          # after Ctrl-C or a crash during replica create",
    "geoservices --json replica resume crew-1.gpkg",
  },
  ["replica info"] = {
    "geoservices replica info crew-1.gpkg",
    "geoservices --json replica info crew-1.gpkg",
  },
  ["replica unregister"] = {
    "geoservices --dry-run replica unregister crew-1.gpkg",
    "geoservices replica unregister crew-1.gpkg",
    "geoservices replica unregister Parcels '*' --yes   # every replica of Parcels you can reach",
  },
  ["replica failed"] = {
    "geoservices replica failed crew-1.gpkg",
    "geoservices --json replica failed crew-1.gpkg",
  },
}
parser.EXAMPLES = EXAMPLES

local function examples_text(path)
  local list = EXAMPLES[path]
  if not list then return nil end
  return "Examples:\n  " .. table.concat(list, "\n  ")
end

-- The end of a command's help: its exit codes, then its examples.
local function epilog(path, exits)
  local parts = {}
  if exits then parts[#parts + 1] = "Exit codes: " .. exits .. "." end
  parts[#parts + 1] = examples_text(path)
  return table.concat(parts, "\n\n")
end

--- Builds the argument parser (lua-argparse). `extra` maps the names of
-- commands defined by their own files to those modules: a module with
-- `define(command)` adds its arguments to its argparse command, whose
-- description is `help`, with its `exits` and `examples` (a list of command lines).
function parser.new(extra)
  local p = argparse("geoservices", "Client of a GIS server's REST interface: replicas kept in GeoPackage stores "
    .. "(.gpkg) that QGIS and GDAL open (createReplica, synchronizeReplica), configure, getServicesById, "
    .. "notebooks/snapshots/list; and a local emulator of the server.")
    :epilog(EPILOG .. "\n\n" .. examples_text(""))
  p:option("--url", "The server's base URL, e.g. https://host/server (default: the --profile's, then "
    .. "$GEOSERVICES_URL, then $GEOSERVICES_PROFILE's or [default]'s; a profile's credentials go only to its own URL).")
  p:option("--profile", "Named profile of $XDG_CONFIG_HOME/geoservices/config (default: $GEOSERVICES_PROFILE, "
    .. "then [default] when there is one).")
  p:option("--admin-path", "Administrative context path (default: admin, or the profile's).")
  p:option("--token", "Token (visible to other local users through the process list: prefer --token-file).")
  p:option("--token-file", "File holding the token; - reads it from standard input.")
  p:option("--token-env", "Name of the environment variable holding the token.", "GEOSERVICES_TOKEN")
  p:option("--username", "Generate tokens with the server's generateToken as this user (password: "
    .. "--password-file, $GEOSERVICES_PASSWORD, or a prompt).")
  p:option("--password-file", "File holding the password of --username; - reads it from standard input.")
  p:option("--token-endpoint", "Where generateToken is, under --url: server (/tokens/generateToken) or portal "
    .. "(/sharing/rest/generateToken).")
    :choices{ "server", "portal" }
  p:flag("--bearer", "Send the token in an Authorization: Bearer header instead of a form field.")
  p:option("--timeout", "Seconds per request (default: 30, or the profile's)."):convert(tonumber)
  p:option("--enum-prefix", "Vendor prefix of enumerated values (esriTransportTypeUrl...).", "esri")
  p:option("--ca-file", "PEM file of the certificate authority to trust.")
  p:flag("--insecure", "Skip TLS certificate verification (never by default).")
  p:flag("--json", "One JSON object per line on standard output, for scripts.")
  p:flag("--dry-run", "Validate and print the request that would be sent, secrets redacted; send nothing.")
  p:flag("--no-color", "No colours on a terminal (also when NO_COLOR is set).")
  p:flag("--version", "Print the version and exit.")
  p:flag("-v --verbose", "More detail (repeatable): each request on standard error (method, URL, status, "
    .. "seconds; secrets redacted).")
    :count("*")
  p:flag("-q --quiet", "No progress and no hints: only the data (standard output) and errors (standard error).")
  p:add_complete()
  p:command_target("command")
  p:require_command(false) -- --version alone; main reports a missing command
  local function command(name, description)
    return p:command(name, description):epilog(epilog(name, COMMAND_EXITS[name]))
  end
  local function subcommand(parent, parent_name, name, description)
    local path = parent_name .. " " .. name
    return parent:command(name, description):epilog(epilog(path, COMMAND_EXITS[path]))
  end

  local sync = command("sync", "Synchronize replica stores (.gpkg): upload their queued local edits, download "
    .. "the server's changes into them; also replica state files (JSON, see geoservices.replica).")
  sync:argument("state", "A replica store (.gpkg), or a replica state file (JSON).", nil, nil, "+")
  sync:option("--edits", "Only with one state file (JSON): edits to upload, a JSON file (the edits array). A "
    .. "store uploads its own queued edits.")
  sync:option("--direction", "syncDirection: download, upload, bidirectional or snapshot.")
    :choices{ "download", "upload", "bidirectional", "snapshot" }
  sync:option("--transport", "transportType: url or embedded.")
    :choices{ "url", "embedded" }
  sync:flag("--async", "Run as an asynchronous job and follow its status.")
  sync:option("--output", "State files only: save the downloaded changes there: a file with one state file, "
    .. "else a directory (<state>.result.json). Default: <state>.changes-from-<generation>.json beside each.")
  sync:flag("--discard", "State files only: count the downloaded changes and keep none of them (the generation "
    .. "still advances).")
  sync:option("--busy-timeout", "Replica stores: seconds to wait while another program (QGIS...) writes the file."
    ):convert(tonumber)
  sync:flag("--adopt-copy", "Replica stores: go on with this copy although another copy of the store synchronized "
    .. "the replica since (that copy is refused from then on).")
  sync:option("--conflicts", "Replica stores: the conflict policy of this sync (default: the store's, manual "
    .. "unless set by geoservices conflicts --policy): manual holds an edit in conflict back, server keeps the "
    .. "server's values, local sends ours over them."):choices{ "manual", "server", "local" }
  sync:option("--late-window", "Seconds after a lost answer (a 502/504, a dropped connection) during which its "
    .. "edits are read again, not sent again, while the server may still apply them (default 660: the server's "
    .. "own limits; 0: once)."):convert(tonumber)
  sync:option("--lock-timeout", "Seconds to wait while another process synchronizes the same replica."):convert(
    tonumber)
  sync:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  sync:option("--wait-timeout", "Overall seconds to wait for an async job."):convert(tonumber)

  local conf = command("configure", "Create the organization and follow its stages until it is ready.")
  conf:argument("params", "Parameters: a JSON file, or a Lua file returning a table (relative paths "
    .. "in it are relative to the file); docs/configure.md lists its members, examples/org.json is a complete "
    .. "one.", nil, nil, "?")
  conf:option("--password-env", "Environment variable holding the administrator password "
    .. "(else a prompt without echo on a terminal).", "ORG_ADMIN_PASSWORD")
  conf:option("--answer-env", "Environment variable holding the security question answer.", "ORG_ADMIN_ANSWER")
  conf:flag("--no-wait", "Return once the server accepted the request.")
  conf:flag("--attach", "Do not send configure: follow a configuration already running.")
  conf:option("--poll-interval", "Seconds between polls of the root resource.", "5"):convert(tonumber)
  conf:option("--stall-after", "Fail when no stage progresses for this many seconds."):convert(tonumber)
  conf:option("--wait-timeout", "Overall seconds to wait.", "10800"):convert(tonumber)

  local services = command("services", "getServicesById: service definitions by id; --search finds services "
    .. "by name (with their ids).")
  services:argument("id", "Service id.", nil, nil, "*")
  services:option("--search", "List the services whose name holds TEXT (case ignored), with their folder and id.")
    :argname("TEXT")

  local snapshots = command("snapshots", "notebooks/snapshots/list: the snapshots of a notebook item.")
  snapshots:argument("item_id", "Notebook item id.")

  command("status", "The organization root resource: state and stages; with a replica store (STORE.gpkg), its "
    .. "replica, generation, last sync, local edits by layer and kind, failed edits and conflicts (no server).")
    :argument("store", "A replica store (.gpkg).", nil, nil, "?")

  local replica = command("replica", "A replica's lifecycle: create one (createReplica) into a replica store "
    .. "(.gpkg) that sync then synchronizes, read the server's view of it, unregister it.")
  replica:command_target("replica_command")
  local rcreate = subcommand(replica, "replica", "create", "createReplica: register a replica of some layers of a "
    .. "feature service and download its data (async by default, followed until done) into OUT: a replica store "
    .. "(OUT.gpkg: a GeoPackage that QGIS and GDAL open, holding the data, its generations and the local edits), "
    .. "or a state file (OUT.json, the data beside it in OUT.data.json).")
  rcreate:argument("service", "The feature service, e.g. Parcels.")
  rcreate:argument("out", "The new replica store (OUT.gpkg), or state file (OUT.json); must not exist.")
  rcreate:option("--layers", "Layer ids, e.g. 0,1."):args(1):count(1)
  rcreate:option("--name", "replicaName.")
  rcreate:option("--model", "syncModel (default perReplica, or perLayer where the service supports only that).")
    :choices{ "perReplica", "perLayer" }
  rcreate:option("--direction", "syncDirection of the replica.")
    :choices{ "bidirectional", "upload", "download" }
  rcreate:option("--transport", "transportType: url (default) or embedded."):choices{ "url", "embedded" }
  rcreate:option("--geometry", "Extent filter: xmin,ymin,xmax,ymax (e.g. -117.2,34.0,-117.1,34.1), or a "
    .. "geometry's JSON.")
  rcreate:option("--in-sr", "The geometry's spatial reference: a wkid or its JSON.")
  rcreate:flag("--attachments", "returnAttachments: the attachments' metadata too.")
  rcreate:flag("--sync", "A synchronous request (real servers answer HTTP 500 to large ones).")
  rcreate:option("--param", "Another createReplica parameter, NAME=VALUE, sent as given (repeatable).")
    :count("*")
  rcreate:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  rcreate:option("--wait-timeout", "Overall seconds to wait for the job."):convert(tonumber)
  local rresume = subcommand(replica, "replica", "resume", "Follow the createReplica job an interrupted create "
    .. "left (journaled beside OUT) and keep its replica in OUT.")
  rresume:argument("out", "The store (.gpkg) or state file create was given.")
  rresume:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  rresume:option("--wait-timeout", "Overall seconds to wait for the job."):convert(tonumber)
  subcommand(replica, "replica", "info", "The replica's resource on the server beside its local state.")
    :argument("state", "A replica store (.gpkg), or a replica state file (JSON).")
  local runregister = subcommand(replica, "replica", "unregister", "unRegisterReplica: the server forgets the "
    .. "replica; the store (or state file) is marked unregistered. Refused while the store holds local edits not "
    .. "sent, rejected edits or conflicts (a state file: a sync whose outcome is unknown), unless --force. With "
    .. "SERVICE REPLICA_ID: that replica of the service, or with '*' every replica of it you can reach (asks first "
    .. "on a terminal; --yes without one).")
  runregister:argument("state", "A replica store (.gpkg), or a replica state file (JSON); or, with REPLICA_ID, a "
    .. "feature service.")
  runregister:argument("replica_id", "With a service: the replica's id ({...}), or '*' for every replica of it you "
    .. "can reach (servers since 10.5.1).", nil, nil, "?")
  runregister:flag("--yes", "With '*': unregister without asking (required without a terminal).")
  runregister:flag("--force", "Unregister even though local edits, rejected edits or conflicts would be stranded.")
  subcommand(replica, "replica", "failed", "The local edits of a replica store the server rejected, with its "
    .. "code and description.")
    :argument("state", "A replica store (.gpkg).")

  local login = command("login", "Generate a token with the server's generateToken (--username, "
    .. "--password-file or a prompt) and store it for the profile, readable only by you (0600), in "
    .. "$XDG_CONFIG_HOME/geoservices/tokens/<profile>.json; later commands of the profile use it until it expires.")
  login:option("--expiration", "Minutes the token is asked for.", "120"):convert(tonumber)

  -- Commands defined by their own files (see geoservices.cli).
  local names = {}
  for name, module in pairs(extra or {}) do
    if type(module) == "table" and module.define then names[#names + 1] = name end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    local module = extra[name]
    EXAMPLES[name] = EXAMPLES[name] or module.examples
    module.define(p:command(name, module.help):epilog(epilog(name, module.exits)))
  end

  -- The emulator's options belong to its own program (geoservices.emulator.main,
  -- in the geoservices-emulator rock): everything after `emulator`, --help
  -- included, is handed to it unparsed.
  command("emulator", "Start the local emulator until interrupted (the geoservices-emulator rock); "
    .. "geoservices emulator --help lists its options.")
    :handle_options(false)
    :argument("emulator_args", "Options of the emulator.", nil, nil, "*")
  return p
end

--- Parses `list` without exiting: true and the parsed arguments, or false,
-- the message and the (sub)command's parser where the mistake is, whose
-- usage is the one to show (`geoservices replica create [-h] ...`, not the
-- top-level one).
-- What argparse cannot say by itself: `services` takes ids, or --search.
-- Returns the command whose usage to print and the message, or nil.
local function broken_rule(p, result)
  if result.services and #(result.id or {}) == 0 and not result.search then
    for _, c in ipairs(p._commands or {}) do
      if c._name == "services" then return c, "give service ids, or --search TEXT to find them by name" end
    end
  end
  return nil
end

-- The long options of the grammar that take a value (and none that is a
-- flag anywhere): `set[name] = true`.
local function value_options(p, set, flags)
  for _, o in ipairs(p._options or {}) do
    for _, name in ipairs(o._aliases or {}) do
      if (o._maxargs or 0) > 0 then set[name] = true else flags[name] = true end
    end
  end
  for _, c in ipairs(p._commands or {}) do value_options(c, set, flags) end
  return set, flags
end

-- A value that starts with a minus and a digit (a western box:
-- `--geometry -117.2,34.0,-117.1,34.1`, any negative number) after an
-- option that takes a value is that value: argparse alone reads it as an
-- unknown option '-1'. Such a pair becomes `--option=value`; nothing after
-- `--` or the emulator's command (its options are its own) is touched.
local function join_negative_values(p, list)
  if type(p._options) ~= "table" then return list end
  local set, flags = value_options(p, {}, {})
  local out, i = {}, 1
  while i <= #list do
    local a = list[i]
    if a == "--" or a == "emulator" then
      table.move(list, i, #list, #out + 1, out)
      break
    end
    local nxt = list[i + 1]
    if set[a] and not flags[a] and type(nxt) == "string" and nxt:match("^%-%.?%d") then
      out[#out + 1] = a .. "=" .. nxt
      i = i + 2
    else
      out[#out + 1] = a
      -- an option's value is never a command ("--name emulator")
      if set[a] and not flags[a] and nxt ~= nil then
        out[#out + 1] = nxt
        i = i + 1
      end
      i = i + 1
    end
  end
  return out
end
parser.join_negative_values = join_negative_values

function parser.parse(p, list)
  list = join_negative_values(p, list)
  if type(p._parse) ~= "function" then -- another argparse: its own pparse, the top usage
    local ok, result = p:pparse(list)
    return ok, result, p
  end
  local failed_in, message
  local ok, result = pcall(p._parse, p, list, function(at, msg)
    failed_in, message = at, msg
    error(msg, 0)
  end)
  if ok then
    local where, rule = broken_rule(p, result)
    if where then return false, rule, where end
    return true, result
  end
  if message == nil then error(result, 0) end
  return false, message, failed_in or p
end

return parser
