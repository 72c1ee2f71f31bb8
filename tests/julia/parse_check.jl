# Parse every file named on the command line with this Julia (Debian's 1.5.3 in the check image) and print one line
# per file: "ok PATH" or "error PATH: what". Julia 1.5 has no Meta.parseall, so the file is parsed expression by
# expression; a syntax error comes back as Expr(:error), an unfinished one as Expr(:incomplete).
function check(path)
    text = read(path, String)
    pos = 1
    while pos <= ncodeunits(text)
        ex, pos = Meta.parse(text, pos; greedy=true, raise=false)
        if ex isa Expr && ex.head in (:error, :incomplete)
            line = count(==('\n'), SubString(text, 1, prevind(text, min(pos, ncodeunits(text) + 1)))) + 1
            return "error $path (near line $line): $(ex.args[1])"
        end
    end
    return "ok $path"
end

foreach(path -> println(check(path)), ARGS)
