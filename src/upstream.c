/* placeholder */ typedef int placeholder_upstream;
