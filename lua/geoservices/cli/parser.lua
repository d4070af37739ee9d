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
  sync = "0 every replica synchronized, 1 a synchronization failed, 2 bad usage or an invalid state file, "
    .. "3 partial (some edits failed), 130 interrupted (a job or edits that may have reached the server: "
    .. "run the same sync again to follow them)",
  configure = "0 the organization is ready (or, with --no-wait, the request was accepted), 1 configuration "
    .. "failed (a stage failed, the deadline passed, the server refused), 2 bad usage or invalid parameters "
    .. "(nothing sent), 130 interrupted (the configuration keeps running: follow it with --attach)",
  services = "0 every id was returned, 1 the request failed, 2 bad usage, 3 some ids were not returned "
    .. "(they are named)",
  snapshots = "0 listed, 1 the request failed, 2 bad usage",
  status = "0 the state was read (ready, in progress or not configured), 1 the request failed or the "
    .. "organization's configuration failed, 2 bad usage",
  login = "0 the token was generated and stored, 1 generateToken refused (wrong password...) or the token "
    .. "could not be stored, 2 bad usage (no address, no username)",
  emulator = "0 stopped, 1 could not start, 2 bad usage, 130 interrupted (Ctrl-C; nothing keeps running)",
  replica = "0 done, 1 the request or the job failed, 2 bad usage, an invalid state file or a request the service "
    .. "cannot take (refused before anything was sent: a sync model or direction it does not support...), "
    .. "3 partial (the createReplica job ended CompletedWithErrors), 130 interrupted (a createReplica job keeps "
    .. "running: follow it with replica resume)",
}

--- Builds the argument parser (lua-argparse).
function parser.new()
  local p = argparse("geoservices", "Client of a GIS server's REST interface: synchronizeReplica, configure, "
    .. "getServicesById, notebooks/snapshots/list; and a local emulator of it.")
    :epilog(EPILOG)
  p:option("--url", "The server's {base_url}, e.g. https://host/server (default: $GEOSERVICES_URL, "
    .. "then the profile's).")
  p:option("--profile", "Named profile of $XDG_CONFIG_HOME/geoservices/config (default: $GEOSERVICES_PROFILE, "
    .. "then [default] when there is one).")
  p:option("--admin-path", "Administrative context path (default: admin, or the profile's).")
  p:option("--token", "Token (visible to other local users through the process list: prefer --token-file).")
  p:option("--token-file", "File holding the token; - reads it from standard input.")
  p:option("--token-env", "Name of the environment variable holding the token.", "GEOSERVICES_TOKEN")
  p:option("--username", "Generate tokens with the server's generateToken as this user (password: "
    .. "--password-file, $GEOSERVICES_PASSWORD, or a prompt).")
  p:option("--password-file", "File holding the password of --username; - reads it from standard input.")
  p:option("--token-endpoint", "Where generateToken is: server ({url}/tokens/generateToken) or portal "
    .. "({url}/sharing/rest/generateToken).")
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
  p:flag("-v --verbose", "More detail (repeatable)."):count("*")
  p:add_complete()
  p:command_target("command")
  p:require_command(false) -- --version alone; main reports a missing command
  local function command(name, description)
    return p:command(name, description):epilog("Exit codes: " .. COMMAND_EXITS[name] .. ".")
  end

  local sync = command("sync", "Synchronize one or more replicas from their state files (see geoservices.replica).")
  sync:argument("state", "Replica state file (JSON) or replica store (.gpkg).", nil, nil, "+")
  sync:option("--edits", "Edits to upload, a JSON file (the edits array); only with one state file.")
  sync:option("--direction", "syncDirection: download, upload, bidirectional or snapshot.")
    :choices{ "download", "upload", "bidirectional", "snapshot" }
  sync:option("--transport", "transportType: url or embedded.")
    :choices{ "url", "embedded" }
  sync:flag("--async", "Run as an asynchronous job and follow its status.")
  sync:option("--output", "Save the downloaded changes there: a file with one state file, else a directory "
    .. "(<state>.result.json). Default: <state>.changes-from-<generation>.json beside each state file.")
  sync:flag("--discard", "Count the downloaded changes and keep none of them (the generation still advances).")
  sync:option("--lock-timeout", "Seconds to wait while another process synchronizes the same replica."):convert(
    tonumber)
  sync:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  sync:option("--wait-timeout", "Overall seconds to wait for an async job."):convert(tonumber)

  local conf = command("configure", "Create the organization and follow its stages until it is ready.")
  conf:argument("params", "Parameters: a JSON file, or a Lua file returning a table (relative paths "
    .. "in it are relative to the file).", nil, nil, "?")
  conf:option("--password-env", "Environment variable holding the administrator password "
    .. "(else a prompt without echo on a terminal).", "ORG_ADMIN_PASSWORD")
  conf:option("--answer-env", "Environment variable holding the security question answer.", "ORG_ADMIN_ANSWER")
  conf:flag("--no-wait", "Return once the server accepted the request.")
  conf:flag("--attach", "Do not send configure: follow a configuration already running.")
  conf:option("--poll-interval", "Seconds between polls of the root resource.", "5"):convert(tonumber)
  conf:option("--stall-after", "Fail when no stage progresses for this many seconds."):convert(tonumber)
  conf:option("--wait-timeout", "Overall seconds to wait.", "10800"):convert(tonumber)

  local services = command("services", "getServicesById: service definitions by id.")
  services:argument("id", "Service id.", nil, nil, "+")

  local snapshots = command("snapshots", "notebooks/snapshots/list: the snapshots of a notebook item.")
  snapshots:argument("item_id", "Notebook item id.")

  command("status", "The organization root resource: state and stages.")

  local replica = command("replica", "A replica's lifecycle: create one (createReplica) into a state file that "
    .. "sync then synchronizes, read the server's view of it, unregister it.")
  replica:command_target("replica_command")
  local rcreate = replica:command("create", "createReplica: register a replica of some layers of a feature "
    .. "service and download its data (async by default, followed until done); the state goes to OUT, the data "
    .. "beside it (OUT without .json, plus .data.json).")
  rcreate:argument("service", "The feature service, e.g. Parcels.")
  rcreate:argument("out", "The new replica's state file (JSON; must not exist), or a replica store (OUT.gpkg: a "
    .. "GeoPackage holding the data, its generations and the local edits).")
  rcreate:option("--layers", "Layer ids, e.g. 0,1."):args(1):count(1)
  rcreate:option("--name", "replicaName.")
  rcreate:option("--model", "syncModel (default perReplica, or perLayer where the service supports only that).")
    :choices{ "perReplica", "perLayer" }
  rcreate:option("--direction", "syncDirection of the replica.")
    :choices{ "bidirectional", "upload", "download" }
  rcreate:option("--transport", "transportType: url (default) or embedded."):choices{ "url", "embedded" }
  rcreate:option("--geometry", "Extent filter: xmin,ymin,xmax,ymax (--geometry=-117.2,34.0,... when it starts "
    .. "with a minus), or a geometry's JSON.")
  rcreate:option("--in-sr", "The geometry's spatial reference: a wkid or its JSON.")
  rcreate:flag("--attachments", "returnAttachments: the attachments' metadata too.")
  rcreate:flag("--sync", "A synchronous request (real servers answer HTTP 500 to large ones).")
  rcreate:option("--param", "Another createReplica parameter, NAME=VALUE, sent as given (repeatable).")
    :count("*")
  rcreate:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  rcreate:option("--wait-timeout", "Overall seconds to wait for the job."):convert(tonumber)
  local rresume = replica:command("resume", "Follow the createReplica job an interrupted create left (journaled "
    .. "beside OUT) and keep its replica in OUT.")
  rresume:argument("out", "The state file create was given.")
  rresume:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  rresume:option("--wait-timeout", "Overall seconds to wait for the job."):convert(tonumber)
  replica:command("info", "The replica's resource on the server beside its local state."):argument("state",
    "Replica state file (JSON) or replica store (.gpkg).")
  replica:command("unregister", "unRegisterReplica: the server forgets the replica; the state file is marked "
    .. "closed."):argument("state", "Replica state file (JSON) or replica store (.gpkg).")
  replica:command("failed", "The local edits of a replica store the server rejected, with its code and "
    .. "description."):argument("state", "Replica store (.gpkg).")

  local login = command("login", "Generate a token with the server's generateToken (--username, "
    .. "--password-file or a prompt) and store it for the profile, readable only by you (0600), in "
    .. "$XDG_CONFIG_HOME/geoservices/tokens/<profile>.json; later commands of the profile use it until it expires.")
  login:option("--expiration", "Minutes the token is asked for.", "120"):convert(tonumber)

  -- The emulator's options belong to its own program (geoservices.emulator.main,
  -- in the geoservices-emulator rock): everything after `emulator`, --help
  -- included, is handed to it unparsed.
  command("emulator", "Start the local emulator until interrupted (the geoservices-emulator rock); "
    .. "geoservices emulator --help lists its options.")
    :handle_options(false)
    :argument("emulator_args", "Options of the emulator.", nil, nil, "*")
  return p
end

return parser
